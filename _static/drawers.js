/*
 * The sidebars' drawers on a narrow screen (pydata-sphinx-theme 0.17's <dialog>s): closed when an entry is tapped,
 * and never left open, invisible and modal, when the window gets wide.
 *
 * Jupyter Book adds every _static/*.js to every page. Below 992 px the site navigation (☰), and below 1200 px the
 * page's contents, open as a modal <dialog>: the theme moves the sidebar's links, and its classes, into the dialog
 * and moves them back when it closes. Two things went wrong:
 *
 * - Tapping an entry of the contents drawer jumped to its section but left the drawer open over the page.
 *   Here a tapped link closes its drawer once the browser has followed it.
 * - The dialog stays open when the window gets wider (a wider window, a tablet turned sideways), where the
 *   sidebar belongs in the page. With the site navigation collapsed on a wide screen (sphinx-book-theme's
 *   pst-sidebar-hidden class, which hides the sidebar from 992 px up), a drawer opened on a narrow one carried
 *   that class, and once the window was wide again it was hidden yet still modal: no link responded, and Escape,
 *   which the theme only handles with the focus inside the drawer, did nothing. Here a drawer closes as soon as
 *   the window reaches the width at which its sidebar is shown in the page (so the links go back to it, collapsed
 *   or not, as the reader left it), and Escape closes an open drawer wherever the focus is.
 *
 * tests/site_check.py taps an entry of the contents drawer on every page and runs sequences of resizing,
 * turning and tapping (DRAWER_SEQUENCES) after each of which no open drawer may be invisible.
 */
"use strict";

(() => {
  // Each drawer, and the width from which its sidebar is shown in the page instead (pydata-sphinx-theme's
  // breakpoints: lg for the site navigation, xl for the page's contents).
  const DRAWERS = [
    ["pst-primary-sidebar-modal", 992],
    ["pst-secondary-sidebar-modal", 1200],
  ];

  const install = () => {
    const drawers = [];
    for (const [id, width] of DRAWERS) {
      const drawer = document.getElementById(id);
      if (!drawer) continue;
      drawers.push(drawer);
      // After the click's default action (the jump to the section, or the next page) has started.
      drawer.addEventListener("click", (event) => {
        if (event.target.closest && event.target.closest("a[href]")) {
          setTimeout(() => drawer.open && drawer.close(), 0);
        }
      });
      const wide = window.matchMedia(`(min-width: ${width}px)`);
      wide.addEventListener("change", () => {
        if (wide.matches && drawer.open) drawer.close();
      });
    }
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      drawers.filter((drawer) => drawer.open).forEach((drawer) => drawer.close());
    });
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", install);
  else install();
})();
