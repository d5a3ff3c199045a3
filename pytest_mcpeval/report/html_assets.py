"""The HTML report's inline style sheet and script (no network at view time: nothing is fetched).

The page is complete without the script: it only adds the filters of the cases table, sorting by a column
header, and buttons that open or close every expandable row.  It reads its options (model names,
diagnoses) from the page's ``<script type="application/json" id="mcpeval-data">`` block, never from
markup, and writes them with ``textContent``, so no string reaches the page as HTML.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """\
:root{--fg:#1f2328;--muted:#59636e;--bg:#fff;--soft:#f6f8fa;--line:#d1d9e0;--ok:#1a7f37;--bad:#cf222e;
--warn:#9a6700;--accent:#0969da}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);
margin:0}
header{background:var(--soft);border-bottom:1px solid var(--line);padding:12px 20px}
header h1{font-size:20px;margin:0 0 4px}
nav{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:13px}
nav a,a{color:var(--accent);text-decoration:none}
main{max-width:1440px;margin:0 auto;padding:0 20px 40px}
h2{font-size:18px;border-bottom:1px solid var(--line);padding-bottom:4px;margin:28px 0 10px}
h3{font-size:15px;margin:18px 0 6px}
p{margin:6px 0}
.muted,.ci{color:var(--muted)}
tr.blind td{color:var(--muted);opacity:.75}
.ci{font-size:12px}
table{border-collapse:collapse;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-weight:600;background:var(--soft)}
td,li,summary{overflow-wrap:break-word}
.wrap,code{overflow-wrap:anywhere}
.s{white-space:nowrap}
.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre,.mono{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);padding:6px 8px;margin:4px 0;
max-height:24em;overflow:auto}
.gate{padding:8px 12px;border-radius:6px;margin:14px 0;border:1px solid}
.gate.pass{background:#dafbe1;border-color:#aceebb}.gate.fail{background:#ffebe9;border-color:#ffcecb}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:180px;max-width:330px}
.card .k{color:var(--muted);font-size:12px}.card .v{font-size:22px;font-weight:600}
.drop,.bad{color:var(--bad)}.up,.ok{color:var(--ok)}.ns{color:var(--muted)}.warn{color:var(--warn)}
.verdict{font-size:12px;font-weight:600}
.heatwrap{overflow:auto;max-width:100%;max-height:80vh}
table.heat{font-size:11px;border-collapse:separate;border-spacing:1px}
.heat td{min-width:2.1em;height:2.1em;text-align:center;vertical-align:middle;padding:0 2px;border:0;background:#f3f4f6;
font-variant-numeric:tabular-nums}
.heat th{background:none;border:0;font-weight:normal;padding:2px 4px;white-space:nowrap}
.heat th.c{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left;vertical-align:bottom}
.heat th.r{text-align:right}
.heat .corner{vertical-align:bottom;text-align:right;color:var(--muted)}
.heat td.d1{background:#d1f0da}.heat td.d2{background:#a7e3b7}.heat td.d3{background:#6fcf8a}
.heat td.d4{background:#2da44e;color:#fff}.heat td.d5{background:#116329;color:#fff}
.heat td.x1{background:#ffe1dc}.heat td.x2{background:#ffb8ad}.heat td.x3{background:#ff8576}
.heat td.x4{background:#d1242f;color:#fff}.heat td.x5{background:#82071e;color:#fff}
.bar{display:inline-block;position:relative;width:110px;height:10px;background:#e6e9ed;border-radius:2px;
vertical-align:middle;margin-right:6px}
.bar i{position:absolute;left:0;top:0;bottom:0;background:var(--accent);border-radius:2px}
.bar b{position:absolute;top:-3px;bottom:-3px;width:2px;margin-left:-1px;background:var(--fg)}
.bar.tok i{background:#8250df}
.diff{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);padding:8px;border-radius:4px;margin:0}
.diff .dl{display:block;padding:0 4px}.diff .dl.del{background:#ffebe9}.diff .dl.ins{background:#e6ffec}
.diff .sign{display:inline-block;width:1.2em;color:var(--muted);user-select:none}
.diff del{background:#ffcecb;color:#82071e}.diff ins{background:#aceebb;color:#116329;text-decoration:none}
.desc-change{display:grid;grid-template-columns:minmax(360px,2fr) 3fr;gap:16px;border:1px solid var(--line);
border-radius:6px;padding:10px 12px;margin:10px 0}
.desc-change h3{margin-top:0}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:11px;border:1px solid var(--line);
background:var(--bg);white-space:nowrap}
.b-mock{border-color:#8c959f}.b-live{border-color:var(--ok);color:var(--ok)}
.b-unmatched,.b-invalid,.b-err{border-color:var(--bad);color:var(--bad)}
.b-fulfilled{border-color:var(--ok);color:var(--ok)}.b-partially_fulfilled{border-color:var(--warn);color:var(--warn)}
.b-not_fulfilled{border-color:var(--bad);color:var(--bad)}
details{margin:2px 0}summary{cursor:pointer}
.flow{border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:8px 0}
.flow>summary{font-weight:600}
.turn{border-left:3px solid var(--line);padding:2px 0 2px 10px;margin:8px 0}
.turn .who{font-size:12px;color:var(--muted)}
.call{margin:4px 0}
.miss td{background:#fff8f0}
.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:8px 0}
.filters input{min-width:260px}
.filters input,.filters select,.filters button{font:inherit;padding:2px 6px}
table.sortable th{cursor:pointer}
svg text{font:11px system-ui,sans-serif;fill:var(--muted)}
svg .curve{fill:none;stroke:var(--accent);stroke-width:2}
svg .grid{stroke:var(--line)}
svg .pt{fill:var(--accent)}
"""

JS = """\
(function () {
  "use strict";
  var holder = document.getElementById("mcpeval-data");
  var data = holder ? JSON.parse(holder.textContent) : {models: [], diagnoses: []};
  function el(tag, text) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function select(label, values) {
    var s = el("select"); s.setAttribute("aria-label", label); s.appendChild(el("option", label));
    s.options[0].value = "";
    values.forEach(function (v) { var o = el("option", v[1]); o.value = v[0]; s.appendChild(o); });
    return s;
  }
  var table = document.getElementById("cases");
  if (table) {
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var bar = el("div"); bar.className = "filters";
    var text = el("input"); text.type = "search"; text.placeholder = "filter: case, tool, diagnosis, text";
    text.setAttribute("aria-label", "filter cases");
    var model = select("all models", data.models.map(function (m, i) { return [String(i), m]; }));
    var outcome = select("all outcomes", [["passed", "passed"], ["missed", "missed"], ["error", "error"]]);
    var diagnosis = select("all diagnoses", data.diagnoses.map(function (d) { return [d, d]; }));
    var open = el("button", "expand all"), close = el("button", "collapse all"), count = el("span");
    count.className = "muted";
    [text, model, outcome, diagnosis, open, close, count].forEach(function (e) { bar.appendChild(e); });
    table.parentNode.insertBefore(bar, table);
    var apply = function () {
      var q = text.value.toLowerCase(), shown = 0;
      rows.forEach(function (r) {
        var ok = (!model.value || r.getAttribute("data-model") === model.value) &&
          (!outcome.value || r.getAttribute("data-outcome") === outcome.value) &&
          (!diagnosis.value || r.getAttribute("data-diagnosis") === diagnosis.value) &&
          (!q || r.textContent.toLowerCase().indexOf(q) >= 0);
        r.hidden = !ok;
        if (ok) shown += 1;
      });
      count.textContent = shown + " of " + rows.length + " shown";
    };
    [text, model, outcome, diagnosis].forEach(function (e) { e.addEventListener("input", apply); });
    var toggle = function (state) {
      return function () {
        rows.forEach(function (r) {
          if (!r.hidden) r.querySelectorAll("details").forEach(function (d) { d.open = state; });
        });
      };
    };
    open.addEventListener("click", toggle(true));
    close.addEventListener("click", toggle(false));
    apply();
  }
  document.querySelectorAll("table.sortable").forEach(function (t) {
    var head = t.tHead && t.tHead.rows[0];
    if (!head) return;
    Array.prototype.forEach.call(head.cells, function (th, col) {
      th.title = "sort";
      th.addEventListener("click", function () {
        var body = t.tBodies[0], asc = th.getAttribute("data-dir") !== "asc";
        Array.prototype.forEach.call(head.cells, function (h) { h.removeAttribute("data-dir"); });
        th.setAttribute("data-dir", asc ? "asc" : "desc");
        var key = function (r) {
          var c = r.cells[col]; if (!c) return "";
          var v = c.getAttribute("data-v"); if (v !== null) return v === "" ? NaN : parseFloat(v);
          return c.textContent.trim().toLowerCase();
        };
        var sorted = Array.prototype.slice.call(body.rows).sort(function (a, b) {
          var x = key(a), y = key(b);
          if (typeof x === "number" && typeof y === "number") {
            if (isNaN(x)) return isNaN(y) ? 0 : 1;
            if (isNaN(y)) return -1;
            return asc ? x - y : y - x;
          }
          return asc ? String(x).localeCompare(String(y)) : String(y).localeCompare(String(x));
        });
        sorted.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
"""


def script_hash(script: str) -> str:
    """The Content-Security-Policy source that allows exactly this inline script (``'sha256-...'``)."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"
