// Draw every chart whose figure the page embeds as JSON: <script id="NAME-figure"
// type="application/json"> is drawn into the element with id NAME-chart. The tables beside
// the charts carry the same figures without JS.
(function () {
  "use strict";
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll('script[type="application/json"][id$="-figure"]').forEach(function (node) {
      var target = document.getElementById(node.id.replace(/-figure$/, "-chart"));
      if (!target) { return; }
      var figure = JSON.parse(node.textContent);
      if (figure.message) {  // nothing to draw: say so instead of empty axes
        var note = document.createElement("p");
        note.className = "chart-empty";
        note.textContent = figure.message;
        target.replaceChildren(note);
        return;
      }
      Plotly.newPlot(target, figure.data, figure.layout, { responsive: true, displaylogo: false });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
