// Live status for a submission page: polls the progress endpoint until the status is final,
// then reloads once so that the server-rendered results appear. The page works without it.
(function () {
  "use strict";
  var box = document.getElementById("status-box");
  if (!box || box.dataset.final === "true") { return; }
  var url = box.dataset.progressUrl;
  var statusEl = document.getElementById("status");
  var bar = document.getElementById("progress");
  var text = document.getElementById("progress-text");
  var errorBox = document.getElementById("error-box");
  // Once a form of the page is sent (Cancel) or the page is left, an answer still on its
  // way must not reload the page: the reload would replace the form's own answer (its
  // "Cancelled" message) with a plain copy of the page.
  var leaving = false;
  var timer = null;
  function schedule(ms) { clearTimeout(timer); timer = setTimeout(poll, ms); }
  window.addEventListener("submit", function (event) {
    if (!event.defaultPrevented) { leaving = true; }
  });
  window.addEventListener("pagehide", function () { leaving = true; });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { leaving = false; schedule(500); }  // back from the history
  });

  function render(p) {
    statusEl.textContent = p.status_display;
    statusEl.className = "status status-" + p.status;
    bar.max = p.shapes_total || 1;
    bar.value = p.shapes_done;
    text.textContent = p.shapes_done + " / " + p.shapes_total + " shapes";
    var queueNote = document.getElementById("queue-note");
    if (queueNote) {
      queueNote.textContent = p.queue ? p.queue.note : "";
      queueNote.hidden = !p.queue;
    }
    if (p.error_message) {
      document.getElementById("error-code").textContent = p.error_code;
      document.getElementById("error-message").textContent = p.error_message;
      errorBox.hidden = false;
    }
  }

  function poll() {
    if (leaving) { return; }
    fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (p) {
        if (leaving) { return; }
        render(p);
        if (p.final) { window.location.reload(); } else { schedule(1000); }
      })
      .catch(function () { if (!leaving) { schedule(3000); } });
  }
  schedule(500);
})();
