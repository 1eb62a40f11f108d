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
