"""The HTML report's inline stylesheet and script (`_html` renders the page around them)."""

from __future__ import annotations

import base64
import hashlib
from typing import Final

__all__ = ["CSP", "CSS", "SCRIPT"]

CSS: Final = """
:root{--ink:#1f2933;--muted:#616e7c;--line:#d9dee4;--bg:#fff;--panel:#f5f7fa;--hl:#111}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
 font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1600px;margin:0 auto;padding:16px 24px 40px}
h1{font-size:20px;margin:0 0 2px}
h1 .model{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-weight:600}
h2{font-size:15px;margin:18px 0 6px}
h2 small,.muted{color:var(--muted);font-weight:400}
.sub{color:var(--muted);margin:0 0 12px}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(120px,1fr));gap:8px;margin:0 0 10px;padding:0}
.fact.wide{grid-column:span 2}
.fact{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:0}
.fact dt{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.fact dd{margin:0;font-size:15px;font-weight:600;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
.yes{color:#1e7d46}.no{color:#b42318}
.alert{background:#fde8e7;border:1px solid #f3b3ae;color:#8a1c13;border-radius:6px;padding:6px 10px;margin:8px 0}
.gauge{position:relative;margin:6px 0 14px;padding-top:18px;max-width:1100px}
.bar{display:flex;align-items:center;gap:8px;margin:3px 0;font-size:12px}
.bar>span:first-child{width:46px;color:var(--muted)}
.bar .v{width:74px;font-variant-numeric:tabular-nums}
.bar .track{flex:1;position:relative;height:14px;background:var(--panel);border-radius:3px}
.bar .fill{position:absolute;left:0;top:0;bottom:0;border-radius:3px;background:#9aa5b1}
.bar.after .fill{background:#3f7fbf}
.ticks{position:absolute;left:54px;right:82px;top:0;bottom:0;pointer-events:none}
.tick{position:absolute;top:0;bottom:0;border-left:2px dashed #444}
.tick b{position:absolute;top:0;right:5px;font-size:11px;font-weight:500;white-space:nowrap;color:#333}
.tick.window b{right:auto;left:5px}
.tick.window{border-left-style:solid}
.chips{display:flex;flex-wrap:wrap;gap:6px;margin:4px 0 8px;padding:0;list-style:none}
.chips li{background:var(--panel);border:1px solid var(--line);border-radius:12px;padding:1px 9px;font-size:12px}
.notes{margin:4px 0 0;padding-left:20px}
.what{font-size:12px;color:var(--muted);margin:8px 0 2px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:8px 0 4px;padding:0;list-style:none;font-size:13px}
.legend li{display:flex;align-items:center;gap:6px;cursor:default;padding:1px 4px;border-radius:4px}
.legend li:hover{background:var(--panel)}
.legend .n{color:var(--muted);font-variant-numeric:tabular-nums}
.sw{display:inline-block;width:14px;height:14px;border-radius:3px;flex:none;border:1px solid rgba(0,0,0,.15)}
.strips{position:relative}
.strip{display:flex;flex-wrap:wrap;gap:2px 0;padding:4px;border:1px solid var(--line);border-radius:6px;
 background:var(--panel);min-height:36px}
.cell{display:block;height:26px;min-width:5px;max-width:100%;border-right:1px solid var(--panel);cursor:pointer}
.r-sys{box-shadow:inset 0 -5px 0 #1f2933}
.r-user{box-shadow:inset 0 -4px 0 #7b8794}
#veil,#marks{position:absolute;inset:0;pointer-events:none;contain:strict}
#veil{background:rgba(255,255,255,.7);opacity:0}
#veil.on{opacity:1}
.lit{position:absolute;display:block;outline:2px solid var(--hl);outline-offset:0;
 box-shadow:0 0 0 4px rgba(255,255,255,.9)}
.scale{font-size:12px;color:var(--muted);margin:6px 0 0}
#tip{position:fixed;z-index:10;display:none;max-width:380px;background:#1f2933;color:#f5f7fa;border-radius:6px;
 padding:8px 10px;font-size:12px;box-shadow:0 4px 14px rgba(0,0,0,.25);pointer-events:none}
#tip table{border-collapse:collapse}
#tip th{text-align:left;color:#9aa5b1;font-weight:400;padding:1px 10px 1px 0;vertical-align:top}
#tip td{padding:1px 0;overflow-wrap:anywhere}
#tip .title{font-weight:600;margin-bottom:4px}
details{margin-top:16px}
summary{cursor:pointer;font-weight:600;font-size:15px}
table.msgs{border-collapse:collapse;width:100%;margin-top:6px;font-size:13px}
.msgs th,.msgs td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
.msgs thead th{position:sticky;top:0;background:var(--bg);border-bottom:2px solid var(--line)}
.msgs td.num{text-align:right;font-variant-numeric:tabular-nums}
.msgs td{overflow-wrap:anywhere}
.msgs tr.flash{background:#fff3c4}
table.totals{border-collapse:collapse;margin:0 0 6px;font-size:13px;font-variant-numeric:tabular-nums}
.totals th,.totals td{padding:2px 10px;border-bottom:1px solid var(--line);text-align:right}
.totals th:first-child{text-align:left}
"""

SCRIPT: Final = """
(function () {
  "use strict";
  // Highlighting never restyles the thousands of cells: a veil (one element) dims the strips and a few
  // absolutely placed marks redraw the lit cells above it, so a hover costs no style or layout pass.
  var strips = document.getElementById("strips"), veil = document.getElementById("veil");
  var marks = document.getElementById("marks"), tip = document.getElementById("tip");
  var lit = [];
  function cells(side) { return document.getElementById("strip-" + side).children; }
  function sideOf(cell) { return cell.parentNode.id === "strip-before" ? "before" : "after"; }
  function clear() {
    lit.forEach(function (el) { el.classList.remove("hl"); });
    lit = [];
    marks.replaceChildren();
    veil.classList.remove("on");
  }
  function light(list) {
    clear();
    var frag = document.createDocumentFragment();
    list.forEach(function (el) {
      if (!el || el.classList.contains("hl")) { return; }
      el.classList.add("hl");
      lit.push(el);
      var mark = document.createElement("i");
      mark.className = el.className.replace(/\\bcell\\b/, "lit");
      // A little taller than the cell, so a lit 5-pixel cell stands out in a dense strip.
      mark.style.cssText = "left:" + el.offsetLeft + "px;top:" + (el.offsetTop - 3) + "px;width:" + el.offsetWidth +
        "px;height:" + (el.offsetHeight + 6) + "px";
      frag.appendChild(mark);
    });
    marks.appendChild(frag);
    veil.classList.add("on");
  }
  function linked(cell) {
    var before = sideOf(cell) === "before", out = [cell];
    (cell.dataset.link || "").split(" ").forEach(function (p) {
      if (p === "") { return; }
      var twin = cells(before ? "after" : "before")[+p];
      out.push(twin);
      // Siblings: the other inputs merged into the same output.
      if (before && twin) {
        (twin.dataset.link || "").split(" ").forEach(function (q) { if (q !== "") { out.push(cells("before")[+q]); } });
      }
    });
    return out;
  }
  function row(cell) {
    var at = Array.prototype.indexOf.call(cell.parentNode.children, cell);
    return document.getElementById(sideOf(cell)[0] + "-" + at);
  }
  function showTip(cell) {
    var tr = row(cell);
    if (!tr) { return; }
    var heads = tr.closest("table").tHead.rows[0].cells, table = document.createElement("table");
    var title = document.createElement("div");
    title.className = "title";
    title.textContent = (sideOf(cell) === "before" ? "Input message " : "Governed message ") + tr.cells[0].textContent;
    for (var i = 1; i < tr.cells.length; i++) {
      var text = tr.cells[i].textContent.trim();
      if (text === "") { continue; }
      var line = table.insertRow(), th = document.createElement("th"), td = line.insertCell();
      th.textContent = heads[i].textContent;
      td.textContent = text;
      line.insertBefore(th, td);
    }
    tip.replaceChildren(title, table);
    tip.style.display = "block";
  }
  function moveTip(ev) {
    var w = tip.offsetWidth, h = tip.offsetHeight, x = ev.clientX + 14, y = ev.clientY + 16;
    if (x + w > window.innerWidth - 8) { x = Math.max(8, ev.clientX - w - 14); }
    if (y + h > window.innerHeight - 8) { y = Math.max(8, ev.clientY - h - 16); }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  strips.addEventListener("mouseover", function (ev) {
    var cell = ev.target.closest(".cell");
    if (!cell) { return; }
    light(linked(cell));
    showTip(cell);
    moveTip(ev);
  });
  strips.addEventListener("mousemove", function (ev) { if (tip.style.display === "block") { moveTip(ev); } });
  strips.addEventListener("mouseout", function (ev) {
    var cell = ev.target.closest(".cell");
    if (cell && !(ev.relatedTarget && cell.contains(ev.relatedTarget))) { clear(); tip.style.display = "none"; }
  });
  strips.addEventListener("click", function (ev) {
    var cell = ev.target.closest(".cell"), tr = cell && row(cell);
    if (!tr) { return; }
    tr.closest("details").open = true;
    tr.scrollIntoView({block: "center"});
    tr.classList.add("flash");
    setTimeout(function () { tr.classList.remove("flash"); }, 1500);
  });
  var legend = document.getElementById("legend");
  legend.addEventListener("mouseover", function (ev) {
    var item = ev.target.closest("li");
    if (!item) { return; }
    var fate = item.dataset.fate;
    light(Array.from(strips.querySelectorAll(".cell")).filter(function (el) { return el.dataset.fate === fate; }));
  });
  legend.addEventListener("mouseleave", clear);
  window.addEventListener("resize", clear);
  document.documentElement.dataset.ready = "1";
})();
"""

_SCRIPT_HASH: Final = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
#: The page loads nothing: its one script is pinned by hash.
CSP: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'"
)
