// The per-shape table's status filter without a page load. The links work without it
// (?status=... is applied by the server, which marks the other rows hidden); this script
// only applies the same choice in place and keeps the address in step.
(function () {
  "use strict";
  var nav = document.getElementById("status-filter");
  var groups = document.getElementById("shape-table");
  if (!nav || !groups) { return; }
  var empty = document.getElementById("filter-empty");
  var missing = document.getElementById("missing-shapes");

  function apply(filter) {
    var anyShown = false;
    groups.querySelectorAll("details.shape-group").forEach(function (details) {
      var shown = 0;
      details.querySelectorAll("tbody tr[data-group]").forEach(function (row) {
        var match = !filter || row.dataset.group === filter;
        row.hidden = !match;
        if (match) { shown += 1; }
      });
      details.hidden = shown === 0;
      // A filter opens the groups it leaves rows in; "all" folds them again.
      details.open = Boolean(filter) && shown > 0;
      anyShown = anyShown || shown > 0;
    });
    if (missing) {
      missing.hidden = Boolean(filter) && filter !== "missing";
      anyShown = anyShown || !missing.hidden;
    }
    if (empty) { empty.hidden = !filter || anyShown; }
    nav.querySelectorAll("a[data-filter]").forEach(function (link) {
      if (link.dataset.filter === filter) {
        link.setAttribute("aria-current", "true");
      } else {
        link.removeAttribute("aria-current");
      }
    });
    var note = document.getElementById("filter-note");
    if (note) { note.hidden = true; }
  }

  nav.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-filter]");
    if (!link) { return; }
    event.preventDefault();
    var filter = link.dataset.filter;
    apply(filter);
    var url = new URL(window.location.href);
    if (filter) { url.searchParams.set("status", filter); } else { url.searchParams.delete("status"); }
    url.hash = "shapes";
    window.history.replaceState(null, "", url);
  });
})();
