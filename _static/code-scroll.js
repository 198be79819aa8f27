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

  const mark = (pre) => {
    const hidden = pre.scrollWidth - pre.clientWidth;
    pre.classList.toggle(RIGHT, hidden > 1 && pre.scrollLeft < hidden - 1);
    pre.classList.toggle(LEFT, hidden > 1 && pre.scrollLeft > 1);
  };

  const markAll = () => document.querySelectorAll(BLOCKS).forEach(mark);

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
