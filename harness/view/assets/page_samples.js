/* The samples browser (server-side filters, search, sort, pages) and one sample's page. */
"use strict";
DV.pages = DV.pages || {};

const SORTS = [
  ["run", "run order"], ["disagreement", "disagreement with humans"], ["spread", "human spread"],
  ["score", "judge score"], ["human", "human rating"],
];
const FILTER_KEYS = ["task", "dataset", "language", "system", "parse", "score_min", "score_max", "q", "sort", "order", "page_size"];

function facetSelect(name, values, current, label) {
  return DV.h("label", {}, label || name,
    DV.h("select", { name, "data-filter": name }, DV.h("option", { value: "" }, "any"),
      values.filter((v) => v.value !== null).map((v) => DV.h("option", { value: v.value, selected: String(v.value) === current }, `${v.value} (${DV.count(v.n)})`))));
}

DV.pages.samples = async function samplesPage(main, key, params) {
  const [facets, ov] = await Promise.all([DV.source.facets(key), DV.source.overview(key)]);
  const p = Object.fromEntries(FILTER_KEYS.map((k) => [k, params.get(k) || ""]));
  const page = parseInt(params.get("page") || "1", 10) || 1;
  sessionStorage.setItem("dv-last-list-" + key, location.hash);

  const form = DV.h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); apply(1); } },
    facetSelect("task", facets.task, p.task),
    facetSelect("dataset", facets.dataset, p.dataset),
    facetSelect("language", facets.language, p.language),
    facets.system.some((v) => v.value !== null) ? facetSelect("system", facets.system, p.system, "chatbot") : null,
    DV.h("label", {}, "parse", DV.h("select", { name: "parse", "data-filter": "parse" },
      [["", "any"], ["ok", "ok"], ["failed", "failed (any reason)"], ...facets.parse_status.filter((v) => v.value !== "ok").map((v) => [v.value, `${v.value} (${DV.count(v.n)})`])]
        .map(([v, l]) => DV.h("option", { value: v, selected: v === p.parse }, l)))),
    DV.h("label", {}, "score ≥", DV.h("input", { type: "number", step: "any", name: "score_min", value: p.score_min, placeholder: DV.num(facets.score_min, 2) })),
    DV.h("label", {}, "score ≤", DV.h("input", { type: "number", step: "any", name: "score_max", value: p.score_max, placeholder: DV.num(facets.score_max, 2) })),
    DV.h("label", {}, "text", DV.h("input", { type: "search", name: "q", value: p.q, placeholder: "words in the dialogue or output" })),
    DV.h("label", {}, "sort by", DV.h("select", { name: "sort", "data-filter": "sort" }, SORTS.map(([v, l]) => DV.h("option", { value: v, selected: v === (p.sort || "run") }, l)))),
    DV.h("label", {}, "order", DV.h("select", { name: "order", "data-filter": "order" },
      [["", "default"], ["desc", "descending"], ["asc", "ascending"]].map(([v, l]) => DV.h("option", { value: v, selected: v === p.order }, l)))),
    DV.h("button", { type: "submit", class: "primary" }, "Apply"),
    DV.h("a", { href: DV.link(["run", key, "samples"]), class: "small" }, "reset"),
  );
  form.querySelectorAll("select").forEach((sel) => sel.addEventListener("change", () => apply(1)));

  function apply(toPage) {
    const fd = new FormData(form);
    const next = {};
    for (const k of FILTER_KEYS) if (fd.get(k)) next[k] = fd.get(k);
    if (p.page_size) next.page_size = p.page_size;
    if (toPage > 1) next.page = toPage;
    location.hash = DV.link(["run", key, "samples"], next);
  }

  const results = DV.h("div", { id: "results" }, DV.h("p", { class: "muted" }, "loading…"));
  const notes = facets.transcripts.available ? [] : facets.transcripts.notes;
  main.replaceChildren(
    DV.h("h1", {}, "Samples ", DV.h("a", { href: DV.link(["run", key]), class: "small mono" }, ov.run_id)),
    DV.h("p", { class: "muted small" }, "judge ", DV.h("span", { class: "spec" }, ov.judge), ` · ${DV.count(facets.n)} samples · ${DV.count(facets.parse_failures)} parse failures`),
    ...notes.map((n) => DV.h("div", { class: "note small" }, n)),
    form, results,
  );
  const query = {};
  for (const k of FILTER_KEYS) if (p[k]) query[k] = p[k];
  if (page > 1) query.page = page;
  const t0 = performance.now();
  let res;
  try { res = await DV.source.samples(key, query); } catch (e) { results.replaceChildren(DV.errorBox(e)); return; }
  DV.setStatus(`${DV.count(res.total)} match · ${Math.round(performance.now() - t0)} ms`);
  const langOf = (r) => r.language;
  const textCell = (r) => DV.h("div", {}, r.context_tail ? DV.text("span", r.context_tail, langOf(r), "ctx") : null,
    DV.text("span", r.snippet === null || r.snippet === undefined ? "—" : r.snippet, langOf(r), "snippet"));
  const textCells = res.rows.map((r) => res.snippets_pending ? DV.h("div", { class: "muted" }, "…") : textCell(r));
  const rows = res.rows.map((r, i) => [
    DV.h("a", { href: DV.sampleLink(key, r.task, r.dataset, r.id), class: "mono sample-link" }, r.id),
    r.language, r.dataset, r.system || "",
    textCells[i],
    DV.num(r.score), DV.num(r.human_rating, 2), DV.num(r.spread, 2),
    r.disagreement === undefined ? "…" : DV.num(r.disagreement, 2),
    r.parse_status === "ok" ? DV.h("span", { class: "badge good" }, "ok") : DV.h("span", { class: "badge bad" }, r.parse_status),
  ]);
  const pager = () => DV.h("div", { class: "pager" },
    DV.h("button", { disabled: res.page <= 1, onclick: () => apply(1) }, "« first"),
    DV.h("button", { disabled: res.page <= 1, onclick: () => apply(res.page - 1) }, "‹ previous"),
    DV.h("span", {}, `page ${DV.count(res.page)} of ${DV.count(res.pages)} · ${DV.count(res.total)} samples`),
    DV.h("button", { disabled: res.page >= res.pages, onclick: () => apply(res.page + 1), class: "next" }, "next ›"),
    DV.h("button", { disabled: res.page >= res.pages, onclick: () => apply(res.pages) }, "last »"));
  results.replaceChildren(
    pager(),
    res.rows.length ? DV.table([
      { label: "sample", cls: "l" }, { label: "lang", cls: "l" }, { label: "dataset", cls: "l" }, { label: "chatbot", cls: "l" },
      { label: "rated text (and the message before it)", cls: "l wrap" }, { label: "judge", cls: "num" }, { label: "human", cls: "num" },
      { label: "spread", cls: "num", title: "standard deviation of the annotators' labels" },
      { label: "disagr.", cls: "num", title: "|percentile rank of the judge's score − that of the human mean| within dataset × language" },
      { label: "parse", cls: "l" }], rows, { cls: "samples", onRow: (i, e) => {
      if (e.target.closest("a")) return;
      const r = res.rows[i];
      location.hash = DV.sampleLink(key, r.task, r.dataset, r.id);
    } }) : DV.h("p", { class: "muted" }, "No sample matches these filters."),
    res.rows.length ? pager() : null,
  );
  if (res.snippets_pending) {
    /* the first pages of a large run come before its search index: their texts follow from the dataset files */
    try {
      const found = (await DV.source.snippets(key, res.rows.map((r) => r.rid))).snippets;
      res.rows.forEach((r, i) => {
        [r.snippet, r.context_tail] = found[String(r.rid)] || [null, null];
        textCells[i].replaceWith(textCell(r));
      });
    } catch (e) { textCells.forEach((c) => { c.textContent = "(text unavailable: " + e.message + ")"; }); }
  }
};

function transcript(item, lang) {
  const out = [];
  if (item.scene) out.push(DV.h("div", { class: "small" }, DV.h("b", {}, "scene: "), DV.text("span", item.scene, lang)));
  if (item.persona) out.push(DV.h("div", { class: "small" }, DV.h("b", {}, "persona: "), DV.text("span", item.persona, lang)));
  const msgs = [];
  for (const m of item.context || []) msgs.push({ role: m.role, text: m.text });
  if (item.response !== null && item.response !== undefined) msgs.push({ role: item.response_role || "assistant", text: item.response, rated: true });
  for (const m of item.turns || []) msgs.push({ role: m.role, text: m.text });
  const box = DV.h("div", { class: "transcript" }, msgs.map((m) => DV.h("div", { class: `msg ${m.role === "user" ? "user" : "assistant"}${m.rated ? " rated" : ""}`, dir: "auto", lang },
    DV.h("span", { class: "who", dir: "ltr" }, m.rated ? `${m.role} — rated response` : m.role), m.text)));
  out.push(box);
  if (item.reference) {
    out.push(DV.h("div", { class: "msg reference", dir: "auto", lang }, DV.h("span", { class: "who", dir: "ltr" }, "reference response"), item.reference));
  }
  return out;
}

function labelTable(human, judge) {
  const dims = [...new Set([...Object.keys(human || {}), ...Object.keys(judge || {})])];
  if (!dims.length) return null;
  const annotators = [...new Set(dims.flatMap((d) => Object.keys((human || {})[d] || {})))];
  const cols = [{ label: "dimension", cls: "l" }, ...(judge ? [{ label: "judge", cls: "num" }] : []), ...annotators.map((a) => ({ label: a, cls: "num" }))];
  const rows = dims.map((d) => [d, ...(judge ? [judge[d] === null || judge[d] === undefined ? "—" : String(judge[d])] : []),
    ...annotators.map((a) => { const v = ((human || {})[d] || {})[a]; return v === null || v === undefined ? "—" : String(v); })]);
  return DV.table(cols, rows, { cls: "labels" });
}

DV.pages.sample = async function samplePage(main, key, params) {
  const task = params.get("task"), dataset = params.get("dataset"), id = params.get("id");
  if (!task || !dataset || !id) throw new Error("a sample link needs task, dataset and id");
  const [data, runs] = await Promise.all([DV.source.sample(key, task, dataset, id), DV.source.runs()]);
  const s = data.sample, lang = s.language;
  const back = sessionStorage.getItem("dv-last-list-" + key) || DV.link(["run", key, "samples"], { task });
  const others = runs.filter((r) => r.key !== key && r.tasks.includes(task) && r.has_samples);
  const judge = [
    ["score", DV.h("b", { class: "judge-score" }, DV.num(s.score, 4))],
    ["parse", s.parse_status === "ok" ? DV.h("span", { class: "badge good" }, "ok") : DV.h("span", { class: "badge bad" }, s.parse_status)],
    s.parse_detail ? ["parse detail", DV.text("span", s.parse_detail)] : null,
    ["judge", DV.h("span", { class: "spec" }, s.judge)],
    ["prompt hash", DV.h("span", { class: "mono" }, s.prompt_hash || "—")],
    ["tokens", `${DV.count(s.prompt_tokens)} prompt + ${DV.count(s.completion_tokens)} completion` + (s.cached ? " (from the cache)" : "")],
  ].filter(Boolean);
  const human = [
    ["human mean", DV.h("b", {}, DV.num(s.human_rating, 3))],
    ["dimension", s.human_dimension || "—"],
    ["spread (sd)", DV.num(s.spread, 3)],
    ["judge rank", s.judge_pct === undefined ? "…" : DV.pct(s.judge_pct)],
    ["human rank", s.human_pct === undefined ? "…" : DV.pct(s.human_pct)],
    ["disagreement", s.disagreement === undefined ? "…" : DV.num(s.disagreement, 3)],
  ];
  const kv = (pairs) => DV.h("dl", { class: "kv" }, pairs.flatMap(([k, v]) => [DV.h("dt", {}, k), DV.h("dd", {}, v)]));
  const extra = s.extra && typeof s.extra === "object" ? s.extra : null;
  const logprobs = extra && (extra.label_logprobs || extra.choice_logprobs || extra.logprobs);
  const dist = s.human_distribution && typeof s.human_distribution === "object" ? s.human_distribution : null;
  main.replaceChildren(
    DV.h("p", { class: "small" }, DV.h("a", { href: back }, "← samples"), " · ", DV.h("a", { href: DV.link(["run", key]) }, "run overview")),
    DV.h("h1", {}, DV.h("span", { class: "mono" }, s.id)),
    DV.h("p", { class: "muted" }, `${s.task} · ${s.dataset} · language ${lang}` + (s.system ? ` · chatbot ${s.system}` : "") + (s.dialogue_id ? ` · dialogue ${s.dialogue_id}` : "")),
    others.length ? DV.h("p", { class: "small" }, "same item in: ", others.map((r, i) => [i ? ", " : "", DV.h("a", { href: DV.sampleLink(r.key, task, dataset, id) }, r.run_id)]),
      others.length ? [" · ", DV.h("a", { href: DV.link(["compare"], { runs: [key, ...others.map((r) => r.key)], task }) }, "compare runs")] : null) : null,
    DV.h("div", { class: "grid2" },
      DV.h("section", {}, DV.h("h2", {}, "Dialogue"),
        data.item_note ? DV.h("div", { class: "note small" }, data.item_note) : null,
        data.item ? transcript(data.item, lang) : DV.h("p", { class: "muted" }, "transcript not available")),
      DV.h("section", {},
        DV.h("h2", {}, "Judge"), DV.h("div", { class: "card" }, kv(judge)),
        logprobs ? [DV.h("h3", {}, "label log-probabilities"), DV.table([{ label: "label", cls: "l" }, { label: "log-prob", cls: "num" }, { label: "p", cls: "num" }],
          Object.entries(logprobs).map(([k, v]) => [k, DV.num(v, 4), v === null ? "—" : DV.num(Math.exp(v), 4)]))] : null,
        DV.h("h3", {}, "raw output"), DV.h("pre", { class: "raw", dir: "auto", lang }, s.raw_output === null ? "(none)" : s.raw_output),
        extra ? DV.details("other judge fields (extra)", DV.json(extra)) : null,
        DV.h("h2", {}, "Humans"), DV.h("div", { class: "card" }, kv(human)),
        dist ? DV.h("div", { class: "small" }, "label distribution: ", Object.entries(dist).map(([k, v]) => DV.h("span", { class: "badge", style: { marginRight: "0.3em" } }, `${k}: ${DV.pct(v)}`))) : null,
        (s.human_labels || s.judge_labels) ? [DV.h("h3", {}, s.judge_labels ? "labels: judge and every annotator" : "every annotator's labels"), labelTable(s.human_labels, s.judge_labels)] : DV.h("p", { class: "muted small" }, "no individual annotator labels in this run (only the mean rating)"),
      )),
  );
};
