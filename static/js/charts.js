// Draw every chart whose figure the page embeds as JSON: <script id="NAME-figure"
// type="application/json"> is drawn into the element with id NAME-chart. The tables beside
// the charts carry the same figures without JS.
(function () {
  "use strict";
  // On a phone the desktop margins leave no room for the plot: smaller type, margins that
  // fit the labels (automargin), no axis title beside the operator names.
  function narrow(layout) {
    layout.font = Object.assign({}, layout.font, { size: 10 });
    if (layout.title) {
      layout.title.font = { size: 12 };
      // A title wider than a phone would be cut at both ends; the page's heading says it.
      if ((layout.title.text || "").length > 44) { layout.title.text = ""; }
    }
    if (layout.margin) {
      layout.margin.l = Math.min(layout.margin.l || 70, 50);
      layout.margin.r = 8;
    }
    ["xaxis", "yaxis"].forEach(function (name) {
      if (layout[name]) {
        layout[name].automargin = true;
        if (layout[name].title) { layout[name].title.font = { size: 10 }; }
      }
    });
  }
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
      var layout = figure.layout;
      if (target.clientWidth < 600) { narrow(layout); }
      Plotly.newPlot(target, figure.data, layout, { responsive: true, displaylogo: false });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
