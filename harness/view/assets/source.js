/* Where the viewer's data comes from: a running `harness view` server (JSON API), or a static bundle
   written by `harness view --bundle` (data files loaded as <script> tags, so the page also works
   from file://). Both answer the same calls with the same shapes. */
"use strict";

DV.ServerSource = class ServerSource {
  constructor() { this.cache = new Map(); }

  async get(url, keep) {
    if (keep && this.cache.has(url)) return this.cache.get(url);
    const p = fetch(url).then(async (r) => {
      let body;
      try { body = await r.json(); } catch (e) { body = { error: r.status + " " + r.statusText }; }
      if (!r.ok) throw new Error(body.error || r.statusText);
      return body;
    });
    if (keep) { this.cache.set(url, p); p.catch(() => this.cache.delete(url)); }
    return p;
  }

  q(params) { const s = new URLSearchParams(params).toString(); return s ? "?" + s : ""; }
  runs() { return this.get("api/runs", true); }
  overview(key) { return this.get(`api/runs/${encodeURIComponent(key)}/overview`, true); }
  facets(key) { return this.get(`api/runs/${encodeURIComponent(key)}/facets`, true); }
  samples(key, params) { return this.get(`api/runs/${encodeURIComponent(key)}/samples` + this.q(params)); }
  snippets(key, rids) { return this.get(`api/runs/${encodeURIComponent(key)}/snippets` + this.q({ rids: rids.join(",") })); }
  sample(key, task, dataset, id) {
    return this.get(`api/runs/${encodeURIComponent(key)}/sample` + this.q({ task, dataset, id }), true);
  }
  scatter(key, task) { return this.get(`api/runs/${encodeURIComponent(key)}/scatter` + this.q({ task }), true); }
  compare(a, b) { return this.get("api/compare" + this.q({ a, b }), true); }
};

/* ---- static bundle ---- */
DV.BundleSource = class BundleSource {
  constructor() {
    this.loaded = new Map();
    this.waiting = new Map();
    this.indexes = new Map();
    window.dialevalPut = (name, data) => {
      const w = this.waiting.get(name);
      if (w) { w.resolve(data); this.waiting.delete(name); }
    };
  }

  load(name) {
    if (this.loaded.has(name)) return this.loaded.get(name);
    const p = new Promise((resolve, reject) => {
      this.waiting.set(name, { resolve });
      const s = document.createElement("script");
      s.src = "data/" + name + ".js";
      s.onerror = () => { this.waiting.delete(name); reject(new Error("missing data file data/" + name + ".js")); };
      document.head.appendChild(s);
    });
    this.loaded.set(name, p);
    p.catch(() => this.loaded.delete(name));
    return p;
  }

  runs() { return this.load("runs"); }
  overview(key) { return this.load(key + "/overview"); }
  facets(key) { return this.load(key + "/facets"); }
  manifest(key) { return this.load(key + "/manifest"); }

  /* every sample of the run as light rows (the index chunks, decoded once) */
  async index(key) {
    if (this.indexes.has(key)) return this.indexes.get(key);
    const p = (async () => {
      const m = await this.manifest(key);
      const chunks = await Promise.all(Array.from({ length: m.index_chunks }, (_, i) => this.load(`${key}/index-${i}`)));
      const rows = [];
      for (const c of chunks) {
        const n = c.rid.length;
        for (let i = 0; i < n; i++) {
          const r = {};
          for (const [col, vals] of Object.entries(c)) {
            if (col === "dicts") continue;
            const d = c.dicts[col];
            r[col] = d ? d[vals[i]] : vals[i];
          }
          rows.push(r);
        }
      }
      return rows;
    })();
    this.indexes.set(key, p);
    return p;
  }

  async samples(key, params) {
    const rows = await this.index(key);
    const q = DV.BundleSource.query(params);
    const out = rows.filter((r) => DV.BundleSource.matches(r, q));
    const keyOf = { run: "rid", score: "score", human: "human_rating", disagreement: "disagreement", spread: "spread" }[q.sort];
    const dir = q.order === "desc" ? -1 : 1;
    out.sort((a, b) => {
      const x = a[keyOf], y = b[keyOf];
      const xn = x === null || x === undefined, yn = y === null || y === undefined;
      if (xn !== yn) return xn ? 1 : -1; // nulls last in both orders, as the server does
      if (!xn && x !== y) return (x < y ? -1 : 1) * dir;
      return a.rid - b.rid;
    });
    const start = (q.page - 1) * q.page_size;
    const page = out.slice(start, start + q.page_size).map((r) => {
      const c = Object.assign({}, r);
      delete c.text;
      return c;
    });
    return {
      total: out.length, page: q.page, page_size: q.page_size,
      pages: Math.max(1, Math.ceil(out.length / q.page_size)), rows: page, derived_ready: true,
    };
  }

  static query(params) {
    const many = (k) => (params[k] ? String(params[k]).split(",").filter((x) => x !== "") : []);
    const num = (k) => {
      if (params[k] === undefined || params[k] === null || params[k] === "") return null;
      const v = Number(params[k]);
      if (Number.isNaN(v)) throw new Error(`${k}=${params[k]} is not a number`);
      return v;
    };
    const sort = params.sort || "run";
    if (!["run", "disagreement", "spread", "score", "human"].includes(sort)) throw new Error(`sort=${sort}: unknown`);
    const order = params.order || (sort === "disagreement" || sort === "spread" ? "desc" : "asc");
    return {
      task: many("task"), dataset: many("dataset"), language: many("language"), system: many("system"),
      parse: params.parse || null, score_min: num("score_min"), score_max: num("score_max"),
      q: (params.q || "").trim().toLowerCase() || null, sort, order,
      page: Math.max(1, parseInt(params.page || "1", 10) || 1),
      page_size: Math.min(500, Math.max(1, parseInt(params.page_size || "50", 10) || 50)),
    };
  }

  static matches(r, q) {
    for (const col of ["task", "dataset", "language", "system"]) {
      if (q[col].length && !q[col].includes(r[col] === null ? null : String(r[col]))) return false;
    }
    if (q.parse === "ok" && r.parse_status !== "ok") return false;
    if (q.parse === "failed" && r.parse_status === "ok") return false;
    if (q.parse && q.parse !== "ok" && q.parse !== "failed" && r.parse_status !== q.parse) return false;
    if (q.score_min !== null && !(r.score !== null && r.score >= q.score_min)) return false;
    if (q.score_max !== null && !(r.score !== null && r.score <= q.score_max)) return false;
    if (q.q && !(r.text || "").includes(q.q)) return false;
    return true;
  }

  async sample(key, task, dataset, id) {
    const rows = await this.index(key);
    const hit = rows.find((r) => r.task === task && r.dataset === dataset && r.id === id);
    if (!hit) throw new Error(`run ${key}: no sample ${JSON.stringify(id)} of dataset ${JSON.stringify(dataset)} in task ${JSON.stringify(task)}`);
    const m = await this.manifest(key);
    const chunk = await this.load(`${key}/rows-${Math.floor(hit.rid / m.detail_rows)}`);
    return chunk[String(hit.rid)];
  }

  async scatter(key, task) {
    const m = await this.manifest(key);
    const i = m.tasks.indexOf(task);
    if (i < 0) throw new Error(`run ${key} has no task ${task}`);
    return this.load(`${key}/scatter-${i}`);
  }

  compare(a, b) { return this.load(`compare/${a}__${b}`); }
};

DV.source = window.DIALEVAL_MODE === "bundle" ? new DV.BundleSource() : new DV.ServerSource();
