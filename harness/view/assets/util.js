/* dialeval viewer: shared helpers (DOM building, formatting, hash URLs). Plain browser JS, no build step. */
"use strict";
window.DV = window.DV || {};

/* h("div", {class: "x", onclick: fn}, child, "text", ...): a DOM element; strings become text nodes (never HTML). */
DV.h = function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
};

/* text written by people or models: the browser picks its direction (Arabic right to left) and script. */
DV.text = function text(tag, value, lang, cls) {
  return DV.h(tag, { dir: "auto", lang: lang || null, class: cls || null }, value === null || value === undefined ? "" : value);
};

DV.num = function num(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  return Number(x).toFixed(digits === undefined ? 3 : digits);
};

DV.signed = function signed(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  const s = Number(x).toFixed(digits === undefined ? 3 : digits);
  return x > 0 ? "+" + s : s;
};

DV.pct = function pct(x) {
  return x === null || x === undefined ? "—" : Math.round(100 * x) + "%";
};

DV.count = function count(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US");
};

DV.pvalue = function pvalue(p, nBoot) {
  if (p === null || p === undefined) return "—";
  if (p === 0) return "< " + (1 / (nBoot || 1000)).toFixed(3);
  return p < 0.001 ? p.toExponential(1) : p.toFixed(3);
};

/* A table inside a scrolling box. cols: [{label, cls}], rows: arrays of cells (Node or text). */
DV.table = function table(cols, rows, opts) {
  opts = opts || {};
  const head = DV.h("tr", {}, cols.map((c) => DV.h("th", { class: c.cls || null, title: c.title || null }, c.label)));
  const body = rows.map((r, i) => {
    const tr = DV.h("tr", { class: (opts.rowClass && opts.rowClass(i)) || null }, r.map((cell, j) =>
      DV.h("td", { class: (cols[j] && cols[j].cls) || null }, cell)));
    if (opts.onRow) { tr.classList.add("click"); tr.addEventListener("click", (e) => opts.onRow(i, e)); }
    return tr;
  });
  return DV.h("div", { class: "table-wrap" }, DV.h("table", { class: opts.cls || null }, DV.h("thead", {}, head), DV.h("tbody", {}, body)));
};

DV.json = function json(obj) {
  return DV.h("pre", { class: "raw mono", dir: "auto" }, JSON.stringify(obj, null, 2));
};

DV.details = function details(summary, content) {
  return DV.h("details", {}, DV.h("summary", {}, summary), content);
};

/* Hash URLs: #/path?query. Every page state is in the URL, so it can be bookmarked and shared. */
DV.parseHash = function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const i = raw.indexOf("?");
  const path = i < 0 ? raw : raw.slice(0, i);
  const params = new URLSearchParams(i < 0 ? "" : raw.slice(i + 1));
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), params };
};

DV.link = function link(parts, params) {
  const path = "#/" + parts.map(encodeURIComponent).join("/");
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === null || v === undefined || v === "" || (Array.isArray(v) && !v.length)) continue;
    q.set(k, Array.isArray(v) ? v.join(",") : String(v));
  }
  const s = q.toString();
  return s ? path + "?" + s : path;
};

DV.sampleLink = function sampleLink(run, task, dataset, id) {
  return DV.link(["run", run, "sample"], { task, dataset, id });
};

DV.setStatus = function setStatus(msg) {
  document.getElementById("status").textContent = msg || "";
};

DV.errorBox = function errorBox(err) {
  return DV.h("div", { class: "error" }, String((err && err.message) || err));
};

/* A small tooltip that follows the pointer (plots). */
DV.tip = {
  show(evt, lines, lang) {
    const t = document.getElementById("tooltip");
    t.replaceChildren(...lines.map((l) => DV.h("div", { dir: "auto", lang: lang || null }, l)));
    t.hidden = false;
    const x = Math.min(evt.clientX + 14, window.innerWidth - t.offsetWidth - 8);
    t.style.left = x + "px";
    t.style.top = evt.clientY + 14 + "px";
  },
  hide() { document.getElementById("tooltip").hidden = true; },
};
