/*
 * Search results with an excerpt of the page's own text.
 *
 * Jupyter Book adds every _static/*.js to every page; this file only acts on the search page, where Sphinx's
 * searchtools.js (Sphinx 7.4) defines the global `Search`. For each result it fetches the page's HTML and
 * Search.makeSearchSummary cuts 240 characters around the first place a search term occurs. Two things go
 * wrong with this theme:
 *
 * - Sphinx takes the text of the element [role="main"]. In pydata-sphinx-theme that is the whole <main>:
 *   the article's header (the download menu ".ipynb" / ".pdf", the "Contents" list of the page) comes
 *   before the article, so an excerpt often shows the menu or the list of sections.
 * - Sphinx looks for the stemmed search terms ("rotari" for "rotary", "interleav" for "interleaved").
 *   When the stem does not occur literally in the text, it finds nothing and shows the first 240
 *   characters of <main>: the download menu, "....ipynb".
 *
 * Here the excerpt is taken from the article (article.bd-article), or from the anchored element when the
 * result points into the page (a glossary term or an API entry: its <dt> together with the <dd> that explains
 * it), around the first word the reader typed, else the first stem, else from the start of the text. A
 * formula, which the page holds as LaTeX source for MathJax, is written as plain text (plainMath). A number
 * typed alone (131072) is searched for, which Sphinx's query parser skips (withNumbers). Nothing is loaded
 * from the network.
 */
"use strict";

(() => {
  const ARTICLE = "article.bd-article";
  const CONTEXT = 120; // characters before the match, as Sphinx; the excerpt is 2 * CONTEXT long

  // The words the reader typed (lower case), from the search page's address: ?q=...
  const typedWords = () =>
    (new URLSearchParams(window.location.search).get("q") || "")
      .toLowerCase()
      .split(/\s+/)
      .filter((word) => word.length > 0 && !word.startsWith("-"));

  // A formula's LaTeX source as plain text: the page holds `\(\omega_i = 10000^{-2i/d_{model}}\)`, which MathJax
  // typesets on the page but an excerpt would show raw. Greek letters and common symbols become their
  // characters, \frac{a}{b} becomes (a)/(b), function names (\sin, \ln) stay, other commands, braces and
  // spacing go: ω_i = 10000^-2i/d_model.
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", Delta: "Δ", epsilon: "ε", varepsilon: "ε", eta: "η",
    theta: "θ", Theta: "Θ", lambda: "λ", mu: "μ", pi: "π", rho: "ρ", sigma: "σ", Sigma: "Σ", tau: "τ",
    phi: "φ", varphi: "φ", psi: "ψ", omega: "ω", Omega: "Ω", ell: "ℓ", sum: "Σ", prod: "Π", infty: "∞",
    cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈", to: "→",
    rightarrow: "→", mapsto: "↦", ldots: "…", dots: "…", cdots: "⋯", pm: "±", in: "∈", sqrt: "√",
    partial: "∂", langle: "⟨", rangle: "⟩", lfloor: "⌊", rfloor: "⌋", lceil: "⌈", rceil: "⌉", mid: "|",
    top: "ᵀ", quad: " ", qquad: " ",
  };
  const FUNCTIONS = new Set(["sin", "cos", "tan", "log", "ln", "exp", "max", "min", "arg", "argmax", "det", "mod"]);
  const plainMath = (tex) =>
    tex
      .replace(/^\s*(\\\(|\\\[|\$\$?)|(\\\)|\\\]|\$\$?)\s*$/g, "")
      .replace(/\\(?:mathrm|text|textrm|mathit|mathbf|mathcal|operatorname|boldsymbol)\{([^{}]*)\}/g, "$1")
      .replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, "($1)/($2)")
      .replace(/\\(?:begin|end)\{[^{}]*\}/g, " ")
      .replace(/\\\\/g, " ")
      .replace(/\\([A-Za-z]+)/g, (match, name) => SYMBOLS[name] || (FUNCTIONS.has(name) ? name : ""))
      .replace(/\\([{}_%#$&])/g, "$1")
      .replace(/\\./g, " ")
      .replace(/[{}&]/g, "")
      .replace(/\s+/g, " ")
      .trim();

  // The text a reader sees in `element`, without the pilcrow links, scripts and styles, each formula as
  // plain text.
  const readableText = (element) => {
    const copy = element.cloneNode(true);
    copy.querySelectorAll(".headerlink, script, style").forEach((node) => node.remove());
    copy.querySelectorAll(".math").forEach((node) => node.replaceWith(` ${plainMath(node.textContent)} `));
    return copy.textContent.replace(/\s+/g, " ").trim();
  };

  // The text of the fetched page `html` the excerpt comes from: the anchored entry, or the whole article.
  const pageText = (html, anchor) => {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const article = doc.querySelector(ARTICLE) || doc.querySelector('[role="main"]');
    if (!article) return "";
    if (anchor) {
      let target = null;
      try {
        target = article.querySelector(anchor);
      } catch (error) {
        target = doc.getElementById(decodeURIComponent(anchor.slice(1)));
      }
      if (target) {
        // A <dt> (a glossary term, an API signature) is explained by the <dd> that follows it, after the other
        // terms of the same entry (a glossary entry with two names, "T5 bias" and "ALiBi", has two <dt>s).
        const entry = target.closest("dt") || target;
        const parts = [readableText(entry)];
        let next = entry.tagName === "DT" ? entry.nextElementSibling : null;
        while (next && next.tagName === "DT") next = next.nextElementSibling;
        if (next) parts.push(readableText(next));
        return parts.join(" ");
      }
    }
    return readableText(article);
  };

  const makeSummary = (html, stems, anchor) => {
    const text = pageText(html, anchor);
    if (text === "") return null;
    const lower = text.toLowerCase();
    // A number typed without separators (131072) is written with them on the page (131,072).
    const grouped = typedWords()
      .filter((word) => /^\d{4,}$/.test(word))
      .map((word) => word.replace(/\B(?=(\d{3})+$)/g, ","));
    const candidates = [...typedWords(), ...grouped, ...stems].map((term) => term.toLowerCase());
    let found = -1;
    for (const term of candidates) {
      found = lower.indexOf(term);
      if (found > -1) break;
    }
    const start = Math.max((found > -1 ? found : 0) - CONTEXT, 0);
    const summary = document.createElement("p");
    summary.classList.add("context");
    summary.textContent =
      (start > 0 ? "..." : "") + text.substr(start, 2 * CONTEXT).trim() + (start + 2 * CONTEXT < text.length ? "..." : "");
    return summary;
  };

  // Sphinx's query parser drops every term made of digits alone, so a search for 131072 looked for nothing;
  // the book's index holds numbers, grouped ones as one word too (book/_ext/posenc_search.py). Put the
  // numbers back among the terms that must be found.
  const withNumbers = (parseQuery) => (query) => {
    const parsed = parseQuery(query);
    const [, searchTerms, , highlightTerms] = parsed;
    for (const term of query.trim().split(/\s+/)) {
      if (/^\d+$/.test(term)) {
        searchTerms.add(term);
        highlightTerms.add(term);
      }
    }
    return parsed;
  };

  const install = () => {
    // `Search` is a top-level const of searchtools.js, which only the search page loads.
    if (typeof Search === "undefined") return;
    Search.makeSearchSummary = makeSummary;
    if (typeof Search._parseQuery === "function") Search._parseQuery = withNumbers(Search._parseQuery);
  };

  // This file is loaded in the page's head, before searchtools.js: install once the page has been parsed,
  // before the search runs (searchtools.js starts it from its own DOMContentLoaded handler, added later).
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", install);
  else install();
})();
