/* The runs list and a run's overview page. */
"use strict";
DV.pages = DV.pages || {};

DV.pages.runs = async function runsPage(main) {
  const runs = await DV.source.runs();
  const checked = new Set();
  const btn = DV.h("button", { class: "primary", disabled: true, onclick: () => {
    location.hash = DV.link(["compare"], { runs: [...checked] });
  } }, "Compare selected runs");
  const rows = runs.map((r) => [
    DV.h("input", { type: "checkbox", "aria-label": "select " + r.key, "data-key": r.key, disabled: !r.has_samples, onchange: (e) => {
      if (e.target.checked) checked.add(r.key); else checked.delete(r.key);
      btn.disabled = checked.size < 2;
    } }),
    DV.h("a", { href: DV.link(["run", r.key]), class: "run-link" }, r.run_id),
    DV.h("span", { class: "spec" }, r.judge),
    r.tasks.join(", "),
    DV.count(r.n_items),
    r.created_at ? r.created_at.replace("T", " ").slice(0, 19) : "—",
    r.incomplete ? DV.h("span", { class: "badge bad" }, "incomplete") : "",
    DV.h("span", { class: "small muted spec" }, r.path),
  ]);
  main.replaceChildren(
    DV.h("h1", {}, runs.length === 1 ? "1 run" : runs.length + " runs"),
    DV.table([{ label: "", cls: "l" }, { label: "run", cls: "l" }, { label: "judge", cls: "l wrap" }, { label: "tasks", cls: "l" },
      { label: "items" }, { label: "created (UTC)", cls: "l" }, { label: "", cls: "l" }, { label: "directory", cls: "l wrap" }], rows, { cls: "runs" }),
    DV.h("p", {}, btn, " ", DV.h("span", { class: "muted small" }, "two or more runs of different judges on the same items")),
  );
};

function provenanceBlock(ov) {
  const dl = DV.h("dl", { class: "kv" });
  for (const p of ov.provenance) {
    dl.appendChild(DV.h("dt", {}, p.name));
    const dd = DV.h("dd", { class: p.name === "judge" ? "spec" : null }, p.value);
    if (p.detail && (typeof p.detail !== "object" || Object.keys(p.detail).length)) dd.appendChild(DV.details("details", DV.json(p.detail)));
    dl.appendChild(dd);
  }
  return DV.h("div", { class: "card" }, dl);
}

function taskTable(ov, t) {
  const cols = t.headers.map((hd, i) => ({ label: hd, cls: i === 0 ? "l" : "num" }));
  cols.push({ label: "", cls: "l" });
  const body = [];
  const open = new Set();
  const table = DV.h("div");
  const draw = () => {
    const rows = [];
    const classes = [];
    for (const r of t.rows) {
      const samples = r.lang === "all" ? DV.link(["run", ov.key, "samples"], { task: t.task })
        : DV.link(["run", ov.key, "samples"], { task: t.task, language: r.lang });
      const failures = Number(r.parse_failures) > 0
        ? DV.h("a", { href: DV.link(["run", ov.key, "samples"], { task: t.task, language: r.lang === "all" ? null : r.lang, parse: "failed" }) }, r.parse_failures)
        : r.parse_failures;
      rows.push([r.lang === "all" ? "all (mean)" : r.lang, r.n, r.sets, ...r.cells, failures,
        DV.h("a", { href: samples, onclick: (e) => e.stopPropagation() }, "samples")]);
      classes.push(r.lang === "all" ? "total" : "");
      if (open.has(r.lang)) {
        for (const d of r.per_dataset) {
          rows.push(["  └ " + d[0], d[1], "", ...d.slice(2), "", ""]);
          classes.push("sub");
        }
      }
    }
    table.replaceChildren(DV.table(cols, rows, {
      cls: "metrics",
      rowClass: (i) => classes[i],
      onRow: (i) => {
        const lang = rows[i][0] === "all (mean)" ? "all" : rows[i][0];
        const r = t.rows.find((x) => x.lang === lang);
        if (!r || !r.per_dataset.length) return;
        if (open.has(lang)) open.delete(lang); else open.add(lang);
        draw();
      },
    }));
  };
  draw();
  body.push(table);
  return body;
}

function altBars(ov) {
  const sec = ov.sections.find((x) => x.key === "alt_test_annotators");
  if (!sec) return null;
  const groups = new Map();
  for (const r of sec.rows) {
    const title = `${r[0]} · ${r[2]}` + (r[1] !== ov.judge ? ` · ${r[1]}` : "");
    if (!groups.has(title)) groups.set(title, []);
    const v = parseFloat(r[5]);
    groups.get(title).push({ label: r[3], value: Number.isNaN(v) ? null : v, win: r[7] === "yes", note: r[6] });
  }
  const summary = ov.sections.find((x) => x.key === "alt_test");
  const verdicts = new Map((summary ? summary.rows : []).map((r) => [`${r[0]} · ${r[2]}` + (r[1] !== ov.judge ? ` · ${r[1]}` : ""), `ω = ${r[3]}, ${r[5]}`]));
  return DV.plots.bars([...groups.entries()].map(([title, bars]) => ({ title: title + (verdicts.has(title) ? " — " + verdicts.get(title) : ""), bars })));
}

DV.pages.overview = async function overviewPage(main, key, params) {
  const ov = await DV.source.overview(key);
  const parts = [
    DV.h("h1", {}, "Run ", DV.h("span", { class: "mono" }, ov.run_id)),
    DV.h("p", {}, "judge ", DV.h("span", { class: "spec" }, ov.judge)),
    ...ov.notes.map((n) => DV.h("div", { class: "note" }, n)),
    DV.h("h2", {}, "Provenance"),
    provenanceBlock(ov),
  ];
  for (const t of ov.task_tables) {
    parts.push(DV.h("h2", { id: "task-" + t.task }, t.task));
    parts.push(DV.h("p", { class: "muted" }, [t.description, t.level && `level: ${t.level}` + (t.levels.length ? ` (+ ${t.levels.join(", ")})` : ""),
      t.dimension && `human dimension: ${t.dimension}`, t.dataset && `dataset: ${t.dataset}`,
      `parse failures: ${DV.count(t.parse_failures)}`].filter(Boolean).join(" · ")));
    for (const n of t.notes) parts.push(DV.h("div", { class: "note small" }, n));
    parts.push(...taskTable(ov, t));
    parts.push(DV.h("p", { class: "small muted" }, "95% bootstrap CIs in brackets; * p < 0.05. Click a language to see its per-dataset values."));
  }
  for (const sec of ov.sections) {
    parts.push(DV.h("h2", { id: "sec-" + sec.key }, sec.title));
    if (sec.note) parts.push(DV.h("p", { class: "muted small" }, sec.note));
    parts.push(DV.table(sec.headers.map((hd, i) => ({ label: hd, cls: i < 3 ? "l" : "num" })), sec.rows.map((r) => r.map((c, i) =>
      i < 3 && /[:+\[]/.test(c) ? DV.h("span", { class: "spec" }, c) : c)), { cls: "section " + sec.key }));
    if (sec.key === "alt_test_annotators") { const b = altBars(ov); if (b) parts.push(b); }
  }
  if (ov.has_samples) {
    const tasks = ov.tasks;
    const task = params.get("task") && tasks.includes(params.get("task")) ? params.get("task") : tasks[0];
    parts.push(DV.h("h2", { id: "plots" }, "Judge vs human, per language"));
    const pick = DV.h("select", { "aria-label": "task", onchange: (e) => {
      location.hash = DV.link(["run", key], { task: e.target.value });
    } }, tasks.map((t) => DV.h("option", { value: t, selected: t === task }, t)));
    parts.push(DV.h("p", {}, "task ", pick, " ", DV.h("span", { class: "muted small" },
      "one point per item: the human mean (bar: ± the annotators' standard deviation) against the judge's score; hover for details, click to open the sample")));
    const holder = DV.h("div", { id: "scatter" }, DV.h("p", { class: "muted" }, "loading…"));
    parts.push(holder);
    main.replaceChildren(...parts);
    const tt = ov.task_tables.find((x) => x.task === task);
    const corr = {};
    if (tt) for (const r of tt.rows) corr[r.lang] = `${tt.metrics[0]} ${r.cells[0]}`;
    try {
      const sc = await DV.source.scatter(key, task);
      holder.replaceChildren(sc.languages.length ? DV.plots.scatter(sc, {
        corr, order: tt ? tt.rows.map((r) => r.lang) : [], onPoint: (p) => { location.hash = DV.sampleLink(key, task, p[3], p[4]); },
      }) : DV.h("p", { class: "muted" }, "no items with both a judge score and a human rating"));
    } catch (e) { holder.replaceChildren(DV.errorBox(e)); }
  } else {
    main.replaceChildren(...parts);
  }
};
