/* The site search (html_search_scorer, set by fencecheck.sphinx), written against
 * Sphinx 7.4's searchtools.js: it replaces four members of its `Search` object and
 * sets the `Scorer`. fencecheck.upstream.sphinx.check holds the installed Sphinx to
 * what is used here.
 *
 * A reader pastes a whole error message, with their own sizes, device names, the
 * function that raised it and a build path in it. Sphinx lists only the pages that
 * hold every word of a query, so one word the book never uses empties the list.
 *
 * 1. A query word the index holds nowhere, not even inside a longer term, is left
 *    out while another word remains ("wrapper___cat", "_th_mm"); where the torch that
 *    raised it was built ("at /opt/conda/...cpp:237") is left out first.
 * 2. An index entry -- the errors page makes each message it lists one -- that shares
 *    most of its words with the query (each run of digits set aside) is listed as a
 *    result of its own, at its anchor, titled by its message, above every other;
 *    its page follows. The same message with other numbers or devices, a prefix,
 *    words after it, or an older list of types finds its entry. So does a section
 *    whose heading is the message, or its start, with every word of it in the query.
 * 3. Words of one or two letters ("t", of "can't") are not highlighted.
 * 4. An excerpt keeps blocks apart with a space, and an anchor with no text of its
 *    own (an index target) shows its section's text.
 */
const tfWords = (text) => new Set(text.toLowerCase().replace(/\d+/g, " ")
  .split(/[^\p{Letter}\p{Number}_]+/u).filter((w) => w.length > 1));

/* How much of an entry and of a query they share: [of the entry, of the query]. */
const tfShared = (entry, query) => {
  let shared = 0;
  entry.forEach((w) => { if (query.has(w)) shared += 1; });
  return [shared / Math.max(entry.size, 1), shared / Math.max(query.size, 1)];
};

/* Rule 2: does an entry of `e` words answer a query of `q` words? Most words shared both
 * ways, or every word of a long enough entry in the query. */
const tfAnswers = ([ofEntry, ofQuery], e, q) => q >= 4 && e >= 3 && (
  (Math.min(ofEntry, ofQuery) >= 0.5 && Math.max(ofEntry, ofQuery) >= 0.8)
  || (e >= 4 && ofEntry === 1 && ofQuery >= 0.3));

/* Where the torch that raised it was built, which older releases put in the message:
 * "(Triggered internally at /path/file.cpp:213.)", "(data_ptr<long> at /path/x.h:5747)",
 * ". at /opt/conda/.../THTensor.cpp:237". No page holds those words. */
const tfStrip = (query) => query
  .replace(/\(Triggered internally at [^)]*\)/gi, " ")
  .replace(/\([^()]*\bat\s+(?:\/|[A-Za-z]:\\)[^()]*:\d+\)/g, " ")
  .replace(/\bat\s+(?:\/|[A-Za-z]:\\)\S*:\d+/g, " ");

const TF_ENTRIES = 5;   // at most this many entries listed for one query
let tfLifted = new Set();   // the pages of the entries listed for the last query

/* An index entry is kept lowercased: its exception's name is given back its capitals. */
const TF_CLASSES = ["RuntimeError", "TypeError", "ValueError", "IndexError", "KeyError", "BufferError",
  "NotImplementedError", "AttributeError", "OverflowError", "ZeroDivisionError",
  "UserWarning", "DeprecationWarning", "FutureWarning"];
const tfCapitals = (text) => TF_CLASSES.reduce(
  (t, name) => (t.startsWith(name.toLowerCase()) ? name + t.slice(name.length) : t), text);

const tfEscape = (text) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

const tfEntryResults = (query) => {
  const index = Search._index;
  const q = tfWords(query);
  const found = [];
  for (const [entry, places] of Object.entries(index.indexentries || {})) {
    const e = tfWords(entry);
    const shared = tfShared(e, q);
    if (tfAnswers(shared, e.size, q.size))
      places.forEach(([file, id]) => found.push([shared[0] + shared[1], entry, file, id]));
  }
  // a heading in a reader's words: a section titled by the message, or its start
  for (const [title, places] of Object.entries(index.alltitles || {})) {
    const t = tfWords(title);
    const shared = tfShared(t, q);
    if (q.size >= 4 && t.size >= 4 && shared[0] === 1 && shared[1] >= 0.3)
      places.forEach(([file, id]) => found.push([shared[0] + shared[1] - 0.5, title, file, id]));
  }
  found.sort((a, b) => b[0] - a[0]);
  const places = new Set();   // one result a place: an entry's other releases' words share it
  const best = found.filter(([, , file, id]) => !places.has(`${file}#${id}`) && places.add(`${file}#${id}`));
  return best.slice(0, TF_ENTRIES).map(([share, entry, file, id]) => [
    index.docnames[file],
    `${index.titles[file]} &gt; ${tfEscape(tfCapitals(entry.length > 90 ? entry.slice(0, 88) + "…" : entry))}`,
    id ? "#" + id : "",
    null,
    200 + Math.round(50 * share),
    index.filenames[file],
  ]);
};

/* Rule 1: is a stemmed word anywhere in the index (as Sphinx looks it up)? */
const tfKnown = (word) => {
  const { terms, titleterms } = Search._index;
  const has = (table) => Object.prototype.hasOwnProperty.call(table, word)
    || (word.length > 2 && Object.keys(table).some((term) => term.includes(word)));
  return has(terms) || has(titleterms);
};

const tfInstall = () => {
  const parse = Search._parseQuery;
  const perform = Search._performSearch;
  Search._parseQuery = (query) => {
    const parsed = parse(tfStrip(query));
    const known = [...parsed[1]].filter(tfKnown);
    if (known.length && known.length < parsed[1].size) parsed[1] = new Set(known);
    parsed[3] = new Set([...parsed[3]].filter((w) => w.length > 2));
    if (typeof SPHINX_HIGHLIGHT_ENABLED !== "undefined" && SPHINX_HIGHLIGHT_ENABLED)
      localStorage.setItem("sphinx_highlight_terms", [...parsed[3]].join(" "));
    return parsed;
  };
  Search._performSearch = (query, ...rest) => {
    const entries = tfEntryResults(query);
    tfLifted = new Set(entries.map((r) => r[0]));
    const results = perform(query, ...rest);   // best last: the page pops from the end
    const anchored = new Set(entries.map((r) => r[0] + r[2]));
    const others = results.filter((r) => !(r[2] && anchored.has(r[0] + r[2])));
    return [...others, ...entries.reverse()];
  };
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".headerlink, script, style").forEach((el) => el.remove());
    doc.querySelectorAll("p, div, li, td, th, dt, dd, pre, tr, h1, h2, h3, h4, h5, h6")
      .forEach((el) => el.append(" "));
    const main = doc.querySelector('[role="main"]');
    let el = anchor ? doc.querySelector(`[role="main"] ${anchor}`) : null;
    while (el && el !== main && !el.textContent.trim()) el = el.parentElement;
    return ((el || main || {}).textContent || "").replace(/\s+/g, " ");
  };
};

if (typeof Search !== "undefined") tfInstall();
else document.addEventListener("DOMContentLoaded", tfInstall);

var Scorer = {
  // Sphinx 7.4's own values
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  // a page with an entry that answers the query follows that entry's own result
  score: (result) => result[4] + (result[4] < 200 && tfLifted.has(result[0]) ? 100 : 0),
};
