/* SVG plots drawn in the page (no plotting library): judge-vs-human scatter per language, and the
   alt-test's advantage probability per annotator. */
"use strict";
DV.plots = {};
const SVG = "http://www.w3.org/2000/svg";

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const c of children.flat()) if (c) el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

function ticks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const step0 = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((st) => st >= step0) || step0;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}

function domain(vals) {
  let lo = Infinity, hi = -Infinity;
  for (const v of vals) if (v !== null && v !== undefined && Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!Number.isFinite(lo)) return [0, 1];
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const pad = (hi - lo) * 0.04;
  return [lo - pad, hi + pad];
}

/* data: scatter() answer; opts: {run, task, corr: {lang: "r = …"}, onPoint(point, lang)} */
DV.plots.scatter = function scatter(data, opts) {
  const W = 260, H = 220, m = { l: 42, r: 8, t: 8, b: 32 };
  const all = data.languages.flatMap((l) => l.points);

  const xd = domain(all.flatMap((p) => [p[0] - (p[2] || 0), p[0] + (p[2] || 0)]));
  const X = (v) => m.l + ((v - xd[0]) / (xd[1] - xd[0])) * (W - m.l - m.r);
  const order = opts.order || [];
  const langs = [...data.languages].sort((a, b) => {
    const i = order.indexOf(a.language), j = order.indexOf(b.language);
    return (i < 0 ? 1e9 : i) - (j < 0 ? 1e9 : j) || (a.language < b.language ? -1 : 1);
  });
  return DV.h("div", { class: "plots" }, langs.map((lang) => {
    // the human scale is shared; the judge's axis is per language (a per-language judge may use other scales)
    const yd = domain(lang.points.map((p) => p[1]));
    const Y = (v) => H - m.b - ((v - yd[0]) / (yd[1] - yd[0])) * (H - m.t - m.b);
    const g = s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `judge vs human, ${lang.language}` });
    for (const t of ticks(xd[0], xd[1], 4)) {
      g.appendChild(s("line", { x1: X(t), x2: X(t), y1: m.t, y2: H - m.b, stroke: "#eef0f3" }));
      g.appendChild(s("text", { x: X(t), y: H - m.b + 13, "font-size": 10, "text-anchor": "middle", fill: "#5f6b7a" }, String(t)));
    }
    for (const t of ticks(yd[0], yd[1], 4)) {
      g.appendChild(s("line", { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t), stroke: "#eef0f3" }));
      g.appendChild(s("text", { x: m.l - 4, y: Y(t) + 3, "font-size": 10, "text-anchor": "end", fill: "#5f6b7a" }, String(t)));
    }
    g.appendChild(s("text", { x: (W + m.l) / 2, y: H - 3, "font-size": 10, "text-anchor": "middle", fill: "#333" }, "human mean (± spread)"));
    g.appendChild(s("text", { x: 10, y: (H - m.b) / 2, "font-size": 10, "text-anchor": "middle", fill: "#333",
      transform: `rotate(-90 10 ${(H - m.b) / 2})` }, "judge score"));
    for (const p of lang.points) {
      const [hx, sy, sp, ds, id] = p;
      if (sp) g.appendChild(s("line", { x1: X(hx - sp), x2: X(hx + sp), y1: Y(sy), y2: Y(sy), stroke: "#9db6e0", "stroke-width": 1 }));
      const c = s("circle", { cx: X(hx), cy: Y(sy), r: 2.8, fill: "#1f5fbf", "fill-opacity": 0.55, class: "pt",
        "data-id": id, "data-dataset": ds, tabindex: 0 });
      c.addEventListener("mousemove", (e) => DV.tip.show(e, [`${ds} / ${id}`, `human ${DV.num(hx, 2)}` + (sp !== null ? ` ± ${DV.num(sp, 2)}` : ""),
        `judge ${DV.num(sy, 3)}`, "click: open the sample"]));
      c.addEventListener("mouseleave", () => DV.tip.hide());
      c.addEventListener("click", () => { DV.tip.hide(); if (opts.onPoint) opts.onPoint(p, lang.language); });
      g.appendChild(c);
    }
    const shown = lang.points.length < lang.n ? ` (${DV.count(lang.points.length)} of ${DV.count(lang.n)} shown)` : ` (n = ${DV.count(lang.n)})`;
    return DV.h("div", { class: "plot", "data-lang": lang.language },
      DV.h("div", { class: "title" }, DV.h("b", {}, lang.language), shown, (opts.corr && opts.corr[lang.language]) ? " · " + opts.corr[lang.language] : ""), g);
  }));
};

/* groups: [{title, bars: [{label, value (0..1), win, note}]}]: horizontal bars with the 0.5 line */
DV.plots.bars = function bars(groups) {
  const W = 330, row = 18, m = { l: 120, r: 40, t: 6, b: 22 };
  const X = (v) => m.l + v * (W - m.l - m.r);
  return DV.h("div", { class: "plots" }, groups.map((grp) => {
    const H = m.t + m.b + row * grp.bars.length;
    const g = s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": grp.title });
    grp.bars.forEach((b, i) => {
      const y = m.t + i * row;
      g.appendChild(s("text", { x: m.l - 5, y: y + 12, "font-size": 11, "text-anchor": "end", fill: "#333" }, b.label));
      if (b.value === null || b.value === undefined) {
        g.appendChild(s("text", { x: m.l + 4, y: y + 12, "font-size": 10, fill: "#8a5a00" }, b.note || "not tested"));
        return;
      }
      g.appendChild(s("rect", { x: m.l, y: y + 3, width: Math.max(1, X(b.value) - m.l), height: row - 6,
        fill: b.win ? "#1b7f3b" : "#ffffff", stroke: b.win ? "#1b7f3b" : "#8a96a6" }));
      g.appendChild(s("text", { x: X(b.value) + 4, y: y + 12, "font-size": 10, fill: "#333" }, DV.num(b.value, 2)));
    });
    const yb = H - m.b;
    g.appendChild(s("line", { x1: X(0.5), x2: X(0.5), y1: m.t, y2: yb, stroke: "#b3261e", "stroke-dasharray": "3 2" }));
    for (const t of [0, 0.5, 1]) g.appendChild(s("text", { x: X(t), y: yb + 13, "font-size": 10, "text-anchor": "middle", fill: "#5f6b7a" }, String(t)));
    return DV.h("div", { class: "plot" }, DV.h("div", { class: "title" }, grp.title), g);
  }));
};
