/*
 * Long names in the sidebars break at their dots, underscores and slashes and between the words of a CamelCase
 * name, not inside a word.
 *
 * Jupyter Book adds every _static/*.js to every page. The page's contents (the right-hand column on a wide screen,
 * a drawer on a narrow one) and the site navigation list section titles with code in them
 * (`posenc.nn.RotaryEmbedding`, `flex_attention`): a name wider than the column was broken anywhere
 * ("posenc.nn.RotaryEmbeddin" / "g"), and so were ordinary words ("FlexAttenti" / "on") while the column was
 * narrow ("FlexAttenti" / "on", and the column was narrower than it looked: any-screen.css). Here a <wbr> (a
 * place where a line may break) follows every dot, underscore and slash of the sidebars' links (an issue's
 * "vllm-project/vllm#48621" too) and separates the words of a CamelCase name in code (MultiAxis, Rotary, Embedding:
 * "MultiAxisRotaryEmbedding." alone is wider than a nested entry of the phone's drawer; a word of prose such as
 * "(CoPE)" stays whole), and any-screen.css
 * breaks a word only when it is wider than the whole column.
 * tests/site_check.py fails a page with a word of the sidebars broken across two lines (a break after a hyphen
 * is a line break, not a broken word), at 1280 px and in the drawers at 390 px.
 */
"use strict";

(() => {
  const LINKS = ".bd-sidebar-secondary a, .bd-sidebar-primary a";
  const CAMEL = /([a-z])([A-Z])/g;

  const addBreaks = (link) => {
    const walker = document.createTreeWalker(link, NodeFilter.SHOW_TEXT);
    const nodes = [];  // [text node, whether it is inside code]
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const inName = node.parentElement !== null && node.parentElement.closest("code, .pre") !== null;
      if (/[._/][^\s._/]/.test(node.textContent) || (inName && /[a-z][A-Z]/.test(node.textContent))) {
        nodes.push([node, inName]);
      }
    }
    for (const [node, inName] of nodes) {
      // split keeps each dot, underscore or slash as a part of its own: end a piece with it, then a <wbr>; a
      // zero-width space marks where a CamelCase word ends (MultiAxis|Rotary|Embedding): a <wbr> there too
      const fragment = document.createDocumentFragment();
      let piece = "";
      // CamelCase only inside code: a name's words (RotaryEmbedding), never a word of prose ("(CoPE)" broke
      // as "(Co" / "PE)" in the contents of the API's position-from-content page)
      const text = inName ? node.textContent.replace(CAMEL, "$1\u200b$2") : node.textContent;
      for (const part of text.split(/(\u200b)|([._/])(?=[^\s._/])/)) {
        if (part === undefined || part === "") continue;
        if (part === "\u200b") {
          fragment.append(piece, document.createElement("wbr"));
          piece = "";
          continue;
        }
        piece += part;
        if (part === "." || part === "_" || part === "/") {
          fragment.append(piece, document.createElement("wbr"));
          piece = "";
        }
      }
      if (piece) fragment.append(piece);
      node.replaceWith(fragment);
    }
  };

  const install = () => document.querySelectorAll(LINKS).forEach(addBreaks);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", install);
  else install();
})();
