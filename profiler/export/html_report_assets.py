"""The style sheet and script inlined into every HTML report.

They live here, apart from the markup, so each reads as one file. Both are inlined because the
report must open from disk with no server and fetch nothing from the network. The script only
ever writes block names with ``textContent``, never as HTML, since names are user strings.
"""

from __future__ import annotations

__all__ = ["REPORT_CSS", "REPORT_SCRIPT"]

REPORT_CSS = """
:root { --ink: #1d232a; --muted: #5c6670; --line: #d9dee3; --accent: #b8430f; --straggler: #c0262d; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
       margin: 0 auto; padding: 24px 32px 48px; max-width: 1200px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
p.note { color: var(--muted); margin: 4px 0 10px; }
.summary { display: flex; flex-wrap: wrap; gap: 12px; margin: 14px 0; }
.summary div { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; }
.summary b { display: block; font-size: 18px; }
.summary span { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
td.number, th.number { text-align: right; white-space: nowrap; }
th.sortable { cursor: pointer; user-select: none; }
th.sortable:hover { color: var(--accent); }
td.name { word-break: break-all; }
.tag { font-size: 11px; color: #1f5f8b; border: 1px solid #9cc3de; border-radius: 3px; padding: 0 4px; margin-left: 6px; }
#flame { position: relative; width: 100%; border: 1px solid var(--line); border-radius: 4px;
         overflow: hidden; background: #fafafa; }
.frame { position: absolute; height: 17px; padding: 0 4px; font-size: 12px; line-height: 17px;
         white-space: nowrap; overflow: hidden; text-overflow: ellipsis; cursor: pointer;
         border-right: 1px solid #fff; color: #1b1b1b; }
.frame:hover { filter: brightness(0.9); outline: 1px solid #333; z-index: 1; }
.frame.hidden { display: none; }
.flame-tools { margin: 6px 0; display: flex; gap: 12px; align-items: center; }
.legend-swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin-right: 4px; }
#tooltip { position: fixed; pointer-events: none; background: #20262d; color: #f4f6f8; padding: 6px 10px;
           border-radius: 4px; font-size: 12px; max-width: 480px; display: none; z-index: 10; }
#tooltip b { display: block; word-break: break-all; margin-bottom: 2px; }
.memory-chart { overflow-x: auto; margin: 8px 0; }
.memory-chart svg { max-width: 100%; height: auto; }
.worker-row { display: grid; grid-template-columns: 140px 1fr 260px; gap: 10px; align-items: center; margin: 3px 0; }
.worker-bar { position: relative; height: 16px; background: #f0f2f4; border-radius: 3px; }
.worker-bar .mean { position: absolute; left: 0; top: 0; bottom: 0; background: #e39a6b; border-radius: 3px; }
.worker-bar .max { position: absolute; top: -2px; bottom: -2px; width: 2px; background: #5c6670; }
.worker-row.straggler .mean { background: var(--straggler); }
.worker-row.straggler .worker-name { color: var(--straggler); font-weight: 600; }
ol.verdicts { padding-left: 22px; margin: 8px 0; }
.verdict { border-left: 4px solid var(--accent); background: #fbf6f2; padding: 8px 12px; margin: 8px 0; }
.verdict.finding { border-left-color: #9cc3de; background: #f5f9fc; }
.verdict .cost { font-weight: 600; }
.verdict p.suggestion { margin: 4px 0; }
.verdict details table { margin-top: 4px; }
.counter-chart { margin: 8px 0 14px; }
.counter-chart svg { width: 100%; height: 80px; background: #fafafa; border: 1px solid var(--line); }
button { font: inherit; padding: 2px 10px; }
"""

REPORT_SCRIPT = """
(function () {
  "use strict";
  var root = document.documentElement;
  window.addEventListener("error", function (event) {
    root.setAttribute("data-report-error", String(event.message));
  });

  var flame = document.getElementById("flame");
  var tooltip = document.getElementById("tooltip");
  var frames = flame ? Array.prototype.slice.call(flame.querySelectorAll(".frame")) : [];
  var EPSILON = 1e-9;

  function showTooltip(frame, event) {
    var lines = [
      ["total", frame.getAttribute("data-total")],
      ["self", frame.getAttribute("data-self")],
      ["calls", frame.getAttribute("data-count")],
      ["share of wall time", frame.getAttribute("data-share")]
    ];
    tooltip.textContent = "";
    var title = document.createElement("b");
    title.textContent = frame.getAttribute("data-name");
    tooltip.appendChild(title);
    lines.forEach(function (line) {
      if (!line[1]) {
        return;
      }
      var row = document.createElement("div");
      row.textContent = line[0] + ": " + line[1];
      tooltip.appendChild(row);
    });
    if (frame.getAttribute("data-note")) {
      var about = document.createElement("div");
      about.textContent = frame.getAttribute("data-note");
      tooltip.appendChild(about);
    }
    if (frame.getAttribute("data-parallel") === "true") {
      var note = document.createElement("div");
      note.textContent = "ran in parallel, beside its parent";
      tooltip.appendChild(note);
    }
    tooltip.style.display = "block";
    var left = Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8);
    tooltip.style.left = Math.max(0, left) + "px";
    tooltip.style.top = (event.clientY + 14) + "px";
  }

  function place(frame, left, width) {
    if (width <= EPSILON) {
      frame.classList.add("hidden");
      return;
    }
    frame.classList.remove("hidden");
    frame.style.left = (left * 100) + "%";
    frame.style.width = (width * 100) + "%";
  }

  function zoom(target) {
    var x0 = Number(target.getAttribute("data-x"));
    var w0 = Number(target.getAttribute("data-w"));
    var d0 = Number(target.getAttribute("data-depth"));
    if (!(w0 > EPSILON)) { return; }
    frames.forEach(function (frame) {
      var x = Number(frame.getAttribute("data-x"));
      var w = Number(frame.getAttribute("data-w"));
      var d = Number(frame.getAttribute("data-depth"));
      var inside = x >= x0 - EPSILON && x + w <= x0 + w0 + EPSILON;
      var encloses = x <= x0 + EPSILON && x + w >= x0 + w0 - EPSILON;
      if (d < d0) {
        place(frame, 0, encloses ? 1 : 0);
      } else {
        place(frame, (x - x0) / w0, inside ? w / w0 : 0);
      }
    });
  }

  frames.forEach(function (frame) {
    frame.addEventListener("mousemove", function (event) { showTooltip(frame, event); });
    frame.addEventListener("mouseleave", function () { tooltip.style.display = "none"; });
    frame.addEventListener("click", function () { zoom(frame); });
  });
  var reset = document.getElementById("flame-reset");
  if (reset && frames.length) {
    reset.addEventListener("click", function () { zoom(frames[0]); });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var body = table.tBodies[0];
    Array.prototype.forEach.call(table.querySelectorAll("th.sortable"), function (header) {
      var descending = true;
      header.addEventListener("click", function () {
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var left = a.cells[header.cellIndex].getAttribute("data-value");
          var right = b.cells[header.cellIndex].getAttribute("data-value");
          var order = isNaN(Number(left)) ? String(left).localeCompare(String(right))
                                          : Number(left) - Number(right);
          return descending ? -order : order;
        });
        descending = !descending;
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });

  root.setAttribute("data-report-ready", String(frames.length));
})();
"""
