// SPDX-License-Identifier: MIT
// flame.js - the viewer inside every SVG that `ftpad flame` writes: zoom,
// reset, search.  Kept to what a browser has without any library, and
// exported as window.ftpadZoom/ftpadReset/ftpadSearch for scripts and
// tests.  trace/embed.cmake makes it a C string at build time, without
// these first comment lines, so that the SVG carries the code alone.
"use strict";
(function () {
var svg = document.documentElement, frames = [], total = 0, W = 0, PAD = 10, CHAR = 7.2;
var details, matched, resetBtn, zoomed = null;
function clip(name, w) {
  var fit = (w - 6) / CHAR;
  if (fit < 3) return "";
  var chars = Array.from(name);
  if (chars.length <= fit) return name;
  return chars.slice(0, Math.floor(fit) - 2).join("") + "..";
}
function place(f, s0, t0) {
  var span = W - 2 * PAD, x, w;
  if (f.s <= s0 && f.s + f.t >= s0 + t0) { x = PAD; w = span; }
  else { x = PAD + (f.s - s0) / t0 * span; w = f.t / t0 * span; }
  f.rect.setAttribute("x", x.toFixed(2));
  f.rect.setAttribute("width", w.toFixed(2));
  f.text.setAttribute("x", (x + 3).toFixed(2));
  f.text.textContent = clip(f.name, w);
}
function show(f, on) {
  if (on) f.g.removeAttribute("display"); else f.g.setAttribute("display", "none");
}
function zoom(z) {
  zoomed = z;
  frames.forEach(function (f) {
    var inside = f.d >= z.d && f.s >= z.s && f.s + f.t <= z.s + z.t;
    var above = f.d < z.d && f.s <= z.s && f.s + f.t >= z.s + z.t;
    show(f, inside || above);
    if (above) f.g.setAttribute("class", f.cls + " ancestor");
    else f.g.setAttribute("class", f.cls);
    if (inside || above) place(f, z.s, z.t);
  });
  svg.setAttribute("data-zoomed", z.name);
  resetBtn.removeAttribute("display");
}
function reset() {
  zoomed = null;
  frames.forEach(function (f) { show(f, true); f.g.setAttribute("class", f.cls); place(f, 0, total); });
  svg.removeAttribute("data-zoomed");
  resetBtn.setAttribute("display", "none");
}
function matcher(term) {
  try { var re = new RegExp(term); return function (s) { return re.test(s); }; }
  catch (e) { return function (s) { return s.indexOf(term) >= 0; }; }
}
/* The share of the time axis under any match, nested matches counted once. */
function coverage(spans) {
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var sum = 0, end = -1;
  spans.forEach(function (s) {
    if (s[0] >= end) { sum += s[1] - s[0]; end = s[1]; }
    else if (s[1] > end) { sum += s[1] - end; end = s[1]; }
  });
  return sum;
}
function search(term) {
  var test = term ? matcher(term) : function () { return false; }, spans = [];
  frames.forEach(function (f) {
    var hit = test(f.name);
    f.cls = hit ? "frame match" : "frame";
    f.g.setAttribute("class", f.cls);
    f.rect.setAttribute("fill", hit ? "rgb(230,0,230)" : f.fill);
    if (hit) spans.push([f.s, f.s + f.t]);
  });
  var pct = total ? 100 * coverage(spans) / total : 0;
  matched.textContent = term ? "Matched: " + pct.toFixed(1) + "%" : "";
  svg.setAttribute("data-matched", term ? pct.toFixed(2) : "");
  if (zoomed) zoom(zoomed);
  return pct;
}
function ask() {
  var term = window.prompt("Search for (a regular expression or text):", "");
  if (term !== null) search(term);
}
/* The graph takes the window's width, and follows it as it changes: drawn
 * at --width for a viewer without scripts (an <img>, a converter). */
function fit() {
  var w = Math.max(Math.floor(window.innerWidth), 2 * PAD + 100);
  if (!window.innerWidth || w === W) return;
  W = w;
  svg.setAttribute("width", W);
  svg.setAttribute("viewBox", "0 0 " + W + " " + svg.getAttribute("height"));
  document.getElementById("background").setAttribute("width", W);
  document.getElementById("title").setAttribute("x", (W / 2).toFixed(1));
  document.getElementById("search").setAttribute("x", W - PAD - 110);
  document.getElementById("clear").setAttribute("x", W - PAD - 45);
  matched.setAttribute("x", W - PAD);
  if (zoomed) zoom(zoomed);
  else frames.forEach(function (f) { place(f, 0, total); });
}
function init() {
  W = +svg.getAttribute("width");
  total = +svg.getAttribute("data-total");
  details = document.getElementById("details");
  matched = document.getElementById("matched");
  resetBtn = document.getElementById("reset");
  var gs = document.getElementById("frames").children;
  for (var i = 0; i < gs.length; i++) {
    var g = gs[i], f = { g: g, rect: g.querySelector("rect"), text: g.querySelector("text"),
      name: g.getAttribute("data-name"), s: +g.getAttribute("data-s"),
      t: +g.getAttribute("data-t"), d: +g.getAttribute("data-d"), cls: "frame" };
    f.fill = f.rect.getAttribute("fill");
    f.info = g.querySelector("title").textContent;
    frames.push(f);
    g.addEventListener("click", zoom.bind(null, f));
    g.addEventListener("mouseover", function (f) { details.textContent = f.info; }.bind(null, f));
    g.addEventListener("mouseout", function () { details.textContent = " "; });
  }
  resetBtn.addEventListener("click", reset);
  document.getElementById("search").addEventListener("click", ask);
  document.getElementById("clear").addEventListener("click", function () { search(""); });
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey && e.key === "f") || e.key === "F3") { e.preventDefault(); ask(); }
    else if (e.key === "Escape") reset();
  });
  window.ftpadZoom = function (name) {
    var f = frames.filter(function (f) { return f.name === name; })[0];
    if (f) zoom(f);
    return !!f;
  };
  window.ftpadReset = reset;
  window.ftpadSearch = search;
  fit();
  window.addEventListener("resize", fit);
}
window.addEventListener("load", init);
})();
