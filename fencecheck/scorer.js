/* The site search's scorer (html_search_scorer, set by fencecheck.sphinx).
 *
 * Sphinx's own scores (the values of Sphinx 7.4's searchtools.js), and one more
 * rule: a query that is one of a page's index entries -- the errors page has each
 * message it lists as one -- once each run of digits is set aside, lists that page
 * first. A reader's message has their own sizes and values ("shape '[16, 400]' is
 * invalid for input of size 9600"), the book's has its own; the words are the
 * same. Sphinx ranks a whole query inside an entry first already; this adds the
 * same message with other numbers, or pasted with words after it.
 */
const tfShape = (text) => " " + text.toLowerCase().replace(/\d+/g, "#")
  .split(/[^\p{Letter}\p{Number}_#]+/u).filter((w) => w).join(" ") + " ";
let tfFound = null;  // [query, Set of docnames] for the query on the page

const tfMessagePages = () => {
  const query = new URLSearchParams(window.location.search).get("q") || "";
  if (tfFound && tfFound[0] === query) return tfFound[1];
  const pages = new Set();
  const q = tfShape(query);
  if (q.trim().split(" ").length >= 4) {
    for (const [entry, found] of Object.entries(Search._index.indexentries || {})) {
      const e = tfShape(entry);
      if ((e.includes(q) && q.length >= e.length / 2) || (q.includes(e) && e.length >= q.length / 2))
        found.forEach(([file]) => pages.add(Search._index.docnames[file]));
    }
  }
  tfFound = [query, pages];
  return pages;
};

var Scorer = {
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  score: (result) => result[4] + (tfMessagePages().has(result[0]) ? 100 : 0),
};
