/*
 * The order of the search results: a page about the words typed comes before a page that only mentions them.
 *
 * Sphinx's searchtools.js scores a page 15 when a word of the query is in its title or in one of its section
 * headings and 5 when it is in its text, and orders equal scores by the page's title, alphabetically: "base"
 * listed the bug gallery ("Catch positional-encoding bugs ...", which has "a base read where ..." in a heading)
 * above "Choosing the base", and "interleaved" listed chapter 1 first and chapter 7, which defines the word,
 * ninth. Sphinx reads this file (html_search_scorer in _config.yml) into language_data.js, which the search
 * page loads after searchtools.js and before it runs a query. Scorer.score gives every result a tier, then
 * Sphinx's own score within the tier, then the reading order (the chapters' file names sort in that order):
 *
 *   5  a function, class or constant of the API reference whose name is the query (posenc.rotate for
 *      "rotate"; not a module: posenc.alibi is a page about ALiBi's code, not about ALiBi);
 *   4  a page whose title holds the query;
 *   3  a page with a section heading that holds the query (or that section itself);
 *   2  a page that defines the query: a glossary term, or a bold phrase of at most four words
 *      (book/_ext/posenc_search.py indexes those as "posenc_bold");
 *   1  any other result: the query is only mentioned.
 *
 * Within a tier a chapter (notebooks/) comes before a page of the reference: "ALiBi" is in the title of
 * chapter 8 and of the API page posenc.alibi, and a reader who types a topic is looking for the chapter.
 *
 * "Holds the query" means its words, in order, each equal to a word of the text or with the same stem
 * ("interleaving" holds "interleaved"); case and punctuation do not count ("M-RoPE" holds "m rope").
 * tests/site_check.py searches the built book for words whose page is known, in Chromium.
 */
var Scorer = {
  // Sphinx's weights (searchtools.js), unchanged
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,

  score: (result) => {
    const [docname, title, anchor, descr, score] = result;
    const index = Search._index;
    const file = index.docnames.indexOf(docname);
    const query = Scorer._words(new URLSearchParams(window.location.search).get("q") || "");
    const holds = (text) => Scorer._holds(Scorer._words(text || ""), query);
    let tier = 1;
    if (query.length === 0 || file < 0) tier = 1;
    else if (descr !== null && !anchor.startsWith("#module-") && holds(title.split(".").pop())) tier = 5;
    else if (holds(index.titles[file])) tier = 4;
    else if (anchor && holds(title.split(" > ").pop())) tier = 3;
    else if (Scorer._headings(index, file).some(holds)) tier = 3;
    else if (anchor.startsWith("#term-") || Scorer._bold(index, file).some(holds)) tier = 2;
    // a chapter before a reference page of the same tier; then Sphinx's score; then the reading order, a
    // fraction under 1, so it never outranks a point of score
    const chapter = docname.startsWith("notebooks/") ? 500 : 0;
    const order = 0.5 * (1 - file / Math.max(index.docnames.length, 1));
    return 1000 * tier + chapter + score + order;
  },

  // The words of `text`, lower case, without punctuation, each with its stem: [[word, stem], ...].
  _words: (text) => {
    const stemmer = typeof Stemmer === "function" ? new Stemmer() : null;
    return text
      .toLowerCase()
      .split(/[^\p{L}\p{N}_]+/u)
      .filter((word) => word.length > 0)
      .map((word) => [word, stemmer ? stemmer.stemWord(word) : word]);
  },

  // Whether `words` holds the phrase `query`: its words in a row, each the same word or of the same stem.
  _holds: (words, query) => {
    if (query.length === 0) return false;
    const same = ([a, aStem], [b, bStem]) => a === b || aStem === bStem;
    for (let start = 0; start + query.length <= words.length; start += 1) {
      if (query.every((word, k) => same(words[start + k], word))) return true;
    }
    return false;
  },

  // The section headings of file number `file` (Sphinx's alltitles: heading -> [[file, anchor], ...]).
  _headings: (index, file) =>
    Object.entries(index.alltitles || {})
      .filter(([, places]) => places.some(([place]) => place === file))
      .map(([heading]) => heading),

  // The short bold phrases of file number `file` (posenc_search.py: phrase -> [file, ...]).
  _bold: (index, file) =>
    Object.entries(index.posenc_bold || {})
      .filter(([, files]) => files.includes(file))
      .map(([phrase]) => phrase),
};
