/*
 * Code that is wider than its box says so: its edge fades where more of it is hidden.
 *
 * Jupyter Book adds every _static/*.js to every page. The chapters' code is formatted to 80 columns, which fit a
 * desktop's box; a phone's box shows about half of them (with the smaller font any-screen.css sets on narrow
 * screens, about 50), and a phone shows no scroll bar until one scrolls: a cut line looked like the whole line.
 * Here each code block (cell inputs, outputs, the API reference's examples) that is wider than its box gets the
 * class posenc-more-right while code is hidden to its right, and posenc-more-left while code is hidden to its
 * left; any-screen.css fades that edge. The classes follow the reader's scrolling, a change of the window's
 * width, and a cell opened behind its toggle. tests/site_check.py fails a page whose code scrolls on a phone
 * without such a sign.
 */
"use strict";

(() => {
  const BLOCKS = "article.bd-article div.highlight pre, article.bd-article div.cell_output pre";
  const RIGHT = "posenc-more-right";
  const LEFT = "posenc-more-left";

  // How much of `pre` is hidden to its right and to its left (a read of its layout).
  const measure = (pre) => {
    const hidden = pre.scrollWidth - pre.clientWidth;
    return [hidden > 1 && pre.scrollLeft < hidden - 1, hidden > 1 && pre.scrollLeft > 1];
  };

  const apply = (pre, [right, left]) => {
    pre.classList.toggle(RIGHT, right);
    pre.classList.toggle(LEFT, left);
  };

  const mark = (pre) => apply(pre, measure(pre));

  // Every block measured first, then every class set: a class set between two reads would make the browser lay
  // the page out again for each block (240 ms instead of 59 ms for chapter 7's 35 blocks, on the loaded machine).
  const markAll = () => {
    const blocks = [...document.querySelectorAll(BLOCKS)];
    const states = blocks.map(measure);
    blocks.forEach((pre, i) => apply(pre, states[i]));
  };

  let pending = false;
  const markSoon = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      markAll();
    });
  };

  const install = () => {
    document.querySelectorAll(BLOCKS).forEach((pre) => {
      pre.addEventListener("scroll", () => mark(pre), { passive: true });
    });
    markAll();
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", install);
  else install();
  window.addEventListener("load", markAll); // after the fonts are in
  window.addEventListener("resize", markSoon);
  document.addEventListener("toggle", markSoon, true); // a <details> opened or closed
  document.addEventListener("click", (event) => {
    // sphinx-togglebutton's hidden cells open with a click on their button, not a <details>
    if (event.target.closest && event.target.closest(".toggle-button, button.toggle-button, summary")) markSoon();
  });
})();
