/* Compare runs: each run against a baseline on the same items (paired bootstrap of the correlation
   difference), agreement between the judges, and the items they disagree on most. */
"use strict";
DV.pages = DV.pages || {};

function deltaCell(e, nBoot, lowerIsBetter) {
  if (!e || e.delta === null || e.delta === undefined) return "—";
  const sig = e.p_value !== null && e.p_value !== undefined && e.p_value < 0.05;
  const ci = e.ci ? ` [${DV.signed(e.ci[0], 2)}, ${DV.signed(e.ci[1], 2)}]` : "";
  const better = lowerIsBetter ? -e.delta : e.delta; // the metric's declared direction
  return DV.h("span", { class: (sig ? "sig " : "") + (better > 0 ? "pos" : better < 0 ? "neg" : ""), title: sig ? "p < 0.05" : null }, DV.signed(e.delta) + ci);
}

function pairBlock(cmp, task, baseKey, otherKey) {
  const t = cmp.tasks.find((x) => x.task === task);
  const out = [DV.h("h2", {}, DV.h("span", { class: "spec" }, cmp.b.judge), DV.h("span", { class: "muted" }, "  vs baseline  "), DV.h("span", { class: "spec" }, cmp.a.judge))];
  if (!t) { out.push(DV.h("p", { class: "muted" }, `task ${task} is not in both runs`)); return out; }
  const c = cmp.counts;
  out.push(DV.h("p", { class: "small muted" }, `${DV.count(t.n_paired)} items of ${task} paired · ${DV.count(c.a - c.paired)} only in the baseline, ${DV.count(c.b - c.paired)} only in the other run (all tasks) · `
    + `parse failures: baseline ${DV.count(t.failures.a)}, other ${DV.count(t.failures.b)} (left out of both: ${DV.count(t.failures.either)}) · `
    + `Krippendorff α between the judges (ranks): ${DV.num(t.alpha_rank)}`));
  if (t.human_mismatch) out.push(DV.h("div", { class: "note" }, `the two runs' human ratings differ on ${DV.count(t.human_mismatch)} items (different dataset versions?): the baseline's are used`));
  const nb = t.deltas.n_bootstrap;
  const cols = [{ label: "lang", cls: "l" }, { label: "n", cls: "num" }];
  const label = (m) => (t.labels || {})[m] || m;
  const lower = (m) => (t.higher_is_better || {})[m] === false;
  for (const m of t.methods) {
    cols.push({ label: `${label(m)}: baseline → other`, cls: "num" }, { label: "Δ [95% CI]", cls: "num", title: "other − baseline" },
      { label: "p", cls: "num" });
  }
  cols.push({ label: "judges ρ", cls: "num", title: "Spearman correlation between the two judges' scores" });
  const rows = [...t.deltas.languages, t.deltas.all].map((L) => [
    L.language === "all" ? "all (mean)" : L.language, DV.count(L.n),
    ...t.methods.flatMap((m) => { const e = L.metrics[m] || {}; return [`${DV.num(e.a)} → ${DV.num(e.b)}`, deltaCell(e, nb, lower(m)), DV.pvalue(e.p_value, nb)]; }),
    DV.num(((L.judges || {}).spearman || {}).value),
  ]);
  out.push(DV.table(cols, rows, { cls: "deltas", rowClass: (i) => (i === rows.length - 1 ? "total" : "") }));
  out.push(DV.h("p", { class: "small muted" }, `${cmp.method}; ${DV.count(nb)} resamples. Bold: p < 0.05.`));
  const top = t.disagreements;
  if (top.length) {
    out.push(DV.h("h3", {}, "Items the two judges disagree on most"));
    out.push(DV.h("p", { class: "small muted" }, "gap = |percentile rank of the baseline's score − that of the other judge| within task × dataset × language; ranks in brackets"));
    out.push(DV.table([{ label: "lang", cls: "l" }, { label: "dataset", cls: "l" }, { label: "sample", cls: "l" },
      { label: "baseline (rank)", cls: "num" }, { label: "other (rank)", cls: "num" }, { label: "human (rank)", cls: "num" }, { label: "gap", cls: "num" }, { label: "", cls: "l" }],
      top.slice(0, 50).map((r) => [r.language, r.dataset,
        DV.h("a", { href: DV.sampleLink(baseKey, r.task, r.dataset, r.id), class: "mono" }, r.id),
        `${DV.num(r.score_a)} (${DV.pct(r.pct_a)})`, `${DV.num(r.score_b)} (${DV.pct(r.pct_b)})`, `${DV.num(r.human, 2)} (${DV.pct(r.pct_h)})`,
        DV.num(r.gap, 2), DV.h("a", { href: DV.sampleLink(otherKey, r.task, r.dataset, r.id) }, "other run's sample")]), { cls: "disagreements" }));
  }
  return out;
}

DV.pages.compare = async function comparePage(main, params) {
  const runs = (await DV.source.runs()).filter((r) => r.has_samples);
  const byKey = new Map(runs.map((r) => [r.key, r]));
  let keys = (params.get("runs") || "").split(",").filter((k) => byKey.has(k));
  if (keys.length < 2) keys = runs.slice(0, 2).map((r) => r.key);
  if (keys.length < 2) {
    main.replaceChildren(DV.h("h1", {}, "Compare runs"), DV.h("p", {}, "Comparing needs two or more runs with samples; this viewer has " + runs.length + "."));
    return;
  }
  const base = keys[0];
  const tasks = byKey.get(base).tasks.filter((t) => keys.slice(1).some((k) => byKey.get(k).tasks.includes(t)));
  const task = tasks.includes(params.get("task")) ? params.get("task") : tasks[0];
  const go = (nextKeys, nextTask) => { location.hash = DV.link(["compare"], { runs: nextKeys, task: nextTask }); };
  const baseSel = DV.h("select", { name: "baseline", onchange: (e) => go([e.target.value, ...keys.filter((k) => k !== e.target.value)], task) },
    runs.map((r) => DV.h("option", { value: r.key, selected: r.key === base }, `${r.run_id} — ${r.judge}`)));
  const checks = DV.h("div", { class: "checks" }, runs.filter((r) => r.key !== base).map((r) => DV.h("label", {},
    DV.h("input", { type: "checkbox", value: r.key, checked: keys.includes(r.key), onchange: (e) => {
      const others = keys.slice(1).filter((k) => k !== r.key);
      if (e.target.checked) others.push(r.key);
      go([base, ...others], task);
    } }), " ", DV.h("span", { class: "spec" }, r.judge), DV.h("span", { class: "muted small" }, ` (${r.run_id})`))));
  const taskSel = DV.h("select", { name: "task", onchange: (e) => go(keys, e.target.value) }, tasks.map((t) => DV.h("option", { value: t, selected: t === task }, t)));
  const body = DV.h("div", {}, DV.h("p", { class: "muted" }, "computing…"));
  main.replaceChildren(DV.h("h1", {}, "Compare runs"),
    DV.h("div", { class: "filters" }, DV.h("label", {}, "baseline", baseSel), DV.h("label", {}, "task", taskSel)),
    DV.h("p", { class: "small" }, "against: "), checks, body);
  if (!task) { body.replaceChildren(DV.h("p", {}, "these runs share no task")); return; }
  const parts = [];
  for (const other of keys.slice(1)) {
    try {
      const cmp = await DV.source.compare(base, other);
      parts.push(DV.h("section", { class: "pair", "data-other": other }, pairBlock(cmp, task, base, other)));
    } catch (e) { parts.push(DV.errorBox(e)); }
    body.replaceChildren(...parts);
  }
};
