// Code and tables that scroll sideways inside their box can be scrolled with
// the keyboard too (WCAG: scrollable regions must be focusable).
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.cell_input pre, article.bd-article table, div.math")
    .forEach((el) => {
      if (el.scrollWidth > el.clientWidth && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
      }
    });
});

// A link to a fence's row on the Verified-on page (from the fence's badge) opens the
// collapsed chapter grid that holds the row, then scrolls to it.
(function () {
  function reveal() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (!target) return;
    for (var el = target.parentElement; el; el = el.parentElement) {
      if (el.tagName === "DETAILS") el.open = true;
    }
    target.scrollIntoView();
    target.classList.add("tf-target");
  }
  window.addEventListener("hashchange", reveal);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
