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
      mark.className = el.className.replace(/\bcell\b/, "lit");
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
