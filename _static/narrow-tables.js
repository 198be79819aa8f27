/*
 * Tables on a narrow screen: a table whose columns do not fit its box is shown as one card per row.
 *
 * Jupyter Book adds every _static/*.js to every page. On a phone (390 px wide, a 342 px column) the audit's
 * tables (chapters 13 and 14), chapter 9's losses and chapter 11's bands have more columns than fit; in their
 * own scrolling box (_static/any-screen.css) a reader saw two or three of them and no sign of the rest. Here,
 * each table of the article whose content is wider than its box gets the class posenc-stacked, and each of its
 * body cells a data-label with its column's header: _static/narrow-tables.css then shows every row as a card,
 * the first cell as its title and each other cell on a line of its own after its column's name. Nothing moves
 * in the page's HTML, so a table that fits (every table on a desktop) is left as it is.
 *
 * The tables are measured again when the window changes width and when a dropdown (<details>) opens, since a
 * table in a closed one has no width to measure. tests/site_check.py fails a page whose table is still wider
 * than its box at 390 px.
 */
"use strict";

(() => {
  const STACKED = "posenc-stacked";

  // The text of each header cell of `table`, by column; null when it has no header row to name its columns.
  const columnNames = (table) => {
    const header = table.tHead && table.tHead.rows[0];
    if (!header) return null;
    return [...header.cells].map((cell) => cell.textContent.replace(/\s+/g, " ").trim());
  };

  const fit = (table) => {
    table.classList.remove(STACKED);
    if (table.getClientRects().length === 0) return; // not displayed: measured when it is
    if (table.scrollWidth <= table.clientWidth + 1) return;
    const names = columnNames(table);
    if (!names) return;
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        [...row.cells].forEach((cell, column) => {
          cell.dataset.label = names[column] || "";
        });
      }
    }
    table.classList.add(STACKED);
  };

  const fitAll = () => document.querySelectorAll("article.bd-article table").forEach(fit);

  let pending = false;
  const fitSoon = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fitAll();
    });
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fitAll);
  else fitAll();
  window.addEventListener("load", fitAll); // after the fonts and MathJax have set the cells' widths
  window.addEventListener("resize", fitSoon);
  document.addEventListener("toggle", fitSoon, true); // a <details> opened or closed
})();
