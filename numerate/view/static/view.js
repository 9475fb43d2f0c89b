// An export's pages hold all their rows: the outcome links and the search box filter them here.
(function () {
  var chosen = "", text = "";
  function apply() {
    document.querySelectorAll("[data-row]").forEach(function (row) {
      var shown = (!chosen || row.dataset.outcome === chosen) &&
        (!text || row.textContent.toLowerCase().indexOf(text) >= 0);
      row.hidden = !shown;
    });
    document.querySelectorAll("[data-filter-outcome]").forEach(function (link) {
      link.classList.toggle("on", link.dataset.filterOutcome === chosen);
    });
  }
  document.querySelectorAll("[data-filter-outcome]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault(); chosen = link.dataset.filterOutcome; apply();
    });
  });
  document.querySelectorAll("form.filters").forEach(function (form) {
    form.addEventListener("submit", function (event) { event.preventDefault(); });
  });
  document.querySelectorAll("[data-filter-text]").forEach(function (box) {
    box.addEventListener("input", function () { text = box.value.toLowerCase(); apply(); });
  });
})();
