/* dialeval annotate: one annotator's page. Plain JS, no framework; talks to /api/{token}/... only.
 *
 * Every submission goes to the server at once and the page moves on only when the server has stored it;
 * a failed request shows the server's error and leaves the form as it was (the same submission id is
 * sent again on retry, so a submission the server stored before failing to answer is counted once).
 * A reload, or a server restart, resumes the queue where the server says it stands.
 */
(function () {
  "use strict";

  const parts = location.pathname.split("/").filter(Boolean);
  const TOKEN = decodeURIComponent(parts[parts.length - 1] || "");
  const RESERVED = { enter: "submit", s: "skip", u: "undo", f: "flag" };
  const state = {
    form: null, toggleKeys: {}, item: null, values: {}, active: null, busy: false, progress: null, pending: null, flagOpen: false,
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function newId() {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b); // available without a secure context (a team server on plain http)
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  async function call(method, path, body) {
    let resp;
    try {
      resp = await fetch(`/api/${encodeURIComponent(TOKEN)}/${path}`, {
        method,
        cache: "no-store",
        headers: body === undefined ? {} : { "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new Error("the server does not answer; your labels are still on this page: try again once it is back");
    }
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    if (!resp.ok) throw new Error((data && data.error) || `the server answered ${resp.status}`);
    return data;
  }

  function showError(message) {
    const box = $("error");
    box.textContent = message ? `Not saved: ${message}` : "";
    box.hidden = !message;
    document.body.dataset.error = message || "";
  }

  function setStatus(text) {
    $("status").textContent = text || "";
  }

  function setBusy(busy) {
    state.busy = busy;
    document.body.dataset.busy = busy ? "1" : "";
    for (const id of ["submit", "skip", "undo"]) $(id).disabled = busy || (id !== "undo" && !state.item);
  }

  // -- keys ---------------------------------------------------------------------------------------
  function assignToggleKeys(fields) {
    // a binary issue is one toggle with one letter: the form's letter unless the page uses it
    // (S, U, F) or another toggle took it; then a letter of the dimension's name, then any free one
    const taken = new Set(Object.keys(RESERVED));
    const out = {};
    for (const f of fields.filter((x) => x.kind === "binary")) {
      const yes = (f.points || []).find((p) => Number(p.value) === Number(f.max));
      const preferred = [yes && yes.key, ...(f.keys || [])].filter(Boolean).map((k) => String(k).toLowerCase());
      const name = f.dimension.toLowerCase().replace(/[^a-z]/g, "");
      const candidates = [...preferred, ...name, ..."abcdeghijklmnopqrtvwxyz"];
      const k = candidates.find((c) => /^[a-z]$/.test(c) && !taken.has(c));
      if (k) { out[f.dimension] = k; taken.add(k); }
    }
    return out;
  }

  function toggleKey(field) {
    return state.toggleKeys[field.dimension] || "";
  }

  function pointKey(field, point, i) {
    const k = point.key !== undefined && point.key !== null ? point.key : (field.keys || [])[i];
    const key = k === undefined || k === null ? "" : String(k).toLowerCase();
    return key && !(key in RESERVED) ? key : "";
  }

  function scaleFields() {
    // the fields digits fill in: Likert scales, and continuous ones with anchor points
    return state.form.fields.filter((f) => f.kind !== "binary" && (f.points || []).length > 0);
  }

  // -- the form ---------------------------------------------------------------------------------------
  function renderForm() {
    const form = state.form;
    $("task").textContent = [form.task, form.dataset, `${form.level} level`].filter(Boolean).join(" · ");
    $("guideline").innerHTML = form.guideline_html || ""; // rendered by the server with raw HTML escaped
    const defs = $("definitions");
    defs.replaceChildren();
    for (const f of form.fields) defs.append(el("dt", { text: f.dimension }), el("dd", { text: f.definition || "—" }));
    const keys = $("shortcuts");
    keys.replaceChildren();
    const row = (k, what) => keys.append(el("dt", {}, el("kbd", { text: k })), el("dd", { text: what }));
    const scales = scaleFields();
    if (scales.length) {
      const ks = scales[0].points.map((p, i) => pointKey(scales[0], p, i)).filter(Boolean);
      if (ks.length) {
        row(`${ks[0]}–${ks[ks.length - 1]}`, scales.length > 1
          ? "a point of the highlighted scale (then the next scale); click a scale to highlight it"
          : `a point of ${scales[0].dimension}`);
      }
    }
    for (const f of form.fields.filter((f) => f.kind === "binary")) {
      const k = toggleKey(f);
      if (k) row(k.toUpperCase(), `toggle ${f.dimension}`);
    }
    row("Enter", "submit and go to the next item");
    row("S", "skip this item");
    row("U", "undo the last item (reopens it)");
    row("F", "flag with a comment");
    row("Esc", "leave the comment box");
  }

  function renderFields() {
    const box = $("fields");
    box.replaceChildren();
    for (const f of state.form.fields) {
      const wrap = el("div", {
        class: "field" + (state.active === f.dimension ? " active" : ""),
        "data-dimension": f.dimension,
        "data-kind": f.kind,
      });
      if (f.kind === "binary") {
        const on = state.values[f.dimension] === Number(f.max);
        const k = toggleKey(f);
        wrap.append(
          el("button", {
            type: "button", class: "toggle", "aria-pressed": on ? "true" : "false", "data-dimension": f.dimension,
            title: f.definition || "",
            onclick: () => toggle(f),
          }, el("span", {}, el("span", { class: "name", text: f.dimension }), on ? " — yes" : " — no"), k ? el("kbd", { text: k.toUpperCase() }) : null),
        );
      } else if ((f.points || []).length > 0) {
        wrap.append(el("div", { class: "name", text: f.dimension }));
        if (f.definition) wrap.append(el("div", { class: "def", text: f.definition }));
        const points = el("div", { class: "points", role: "group", "aria-label": f.dimension });
        f.points.forEach((p, i) => {
          const k = pointKey(f, p, i);
          const chosen = state.values[f.dimension] === Number(p.value);
          points.append(el("button", {
            type: "button", class: "point", "aria-pressed": chosen ? "true" : "false",
            "data-value": p.value, title: p.label || "",
            onclick: () => { choose(f, Number(p.value)); },
          }, el("span", { text: formatValue(p.value) }), p.label && p.label !== formatValue(p.value) ? el("span", { class: "small", text: ` ${p.label}` }) : null, k && k !== String(formatValue(p.value)) ? el("kbd", { text: k }) : null));
        });
        wrap.append(points);
        if (f.kind === "continuous") wrap.append(numberInput(f));
        wrap.addEventListener("click", () => { if (state.active !== f.dimension) { state.active = f.dimension; renderFields(); } });
      } else {
        wrap.append(el("div", { class: "name", text: f.dimension }));
        if (f.definition) wrap.append(el("div", { class: "def", text: f.definition }));
        wrap.append(numberInput(f));
      }
      box.append(wrap);
    }
    updateMissing();
  }

  function numberInput(f) {
    const input = el("input", {
      type: "number", min: f.min, max: f.max, step: "any", value: state.values[f.dimension] ?? "",
      "data-dimension": f.dimension, "aria-label": `${f.dimension} (${f.min}–${f.max})`,
    });
    input.addEventListener("change", () => {
      if (input.value === "") delete state.values[f.dimension];
      else state.values[f.dimension] = Number(input.value);
      renderFields();
    });
    return el("label", { class: "number small" }, `any value ${formatValue(f.min)}–${formatValue(f.max)}: `, input);
  }

  function formatValue(v) {
    return Number.isInteger(Number(v)) ? String(Number(v)) : String(v);
  }

  function missing() {
    return state.form.fields.filter((f) => !(f.dimension in state.values)).map((f) => f.dimension);
  }

  function updateMissing() {
    const m = state.item ? missing() : [];
    $("missing").textContent = m.length ? `Still to label: ${m.join(", ")}` : "";
  }

  function resetValues(previous) {
    state.values = {};
    for (const f of state.form.fields) {
      if (previous && f.dimension in previous) state.values[f.dimension] = Number(previous[f.dimension]);
      else if (f.kind === "binary") state.values[f.dimension] = Number(f.min); // an issue is absent until toggled
    }
    const scales = scaleFields();
    const open = scales.find((f) => !(f.dimension in state.values));
    state.active = (open || scales[0] || {}).dimension || null;
    state.pending = null;
  }

  function toggle(f) {
    if (!state.item || state.busy) return;
    state.values[f.dimension] = state.values[f.dimension] === Number(f.max) ? Number(f.min) : Number(f.max);
    renderFields();
  }

  function choose(f, value) {
    if (!state.item || state.busy) return;
    state.values[f.dimension] = value;
    const scales = scaleFields();
    const next = scales.slice(scales.indexOf(f) + 1).find((s) => !(s.dimension in state.values));
    state.active = next ? next.dimension : f.dimension;
    renderFields();
  }

  // -- the item -----------------------------------------------------------------------------------------
  function message(role, text, turn, extra) {
    const who = [turn ? `turn ${turn}` : null, role].filter(Boolean).join(" · ");
    const cls = role === "user" || role === "assistant" ? role : "assistant";
    return el("div", { class: `msg ${cls}${extra ? " " + extra : ""}`, "data-role": role, "data-turn": turn || "" },
      el("span", { class: "who", text: who }), String(text));
  }

  function renderItem() {
    const item = state.item;
    const box = $("item");
    const head = $("item-head");
    box.replaceChildren();
    head.replaceChildren();
    if (!item) {
      box.append(el("div", { class: "card done" },
        el("h2", { text: "Your queue is done. Thank you!" }),
        el("p", { class: "muted", text: "Every label you submitted is stored. Undo reopens your last item." })));
      document.body.dataset.item = "done";
      return;
    }
    head.append(...[
      el("span", { class: "pos", text: `Item ${item.position} of ${item.total}` }),
      el("span", { class: "badge", text: item.language }),
      el("span", { class: "badge", text: item.level === "dialogue" ? "rate the whole dialogue" : "rate the highlighted response" }),
      item.previous ? el("span", { class: "badge", text: "reopened: your earlier labels are filled in" }) : null,
    ].filter(Boolean));
    const dir = item.direction === "rtl" ? "rtl" : "ltr";
    const content = el("div", { class: "card item", dir, lang: item.language || "", "data-item": item.item_id });
    if (item.persona) content.append(el("div", { class: "persona" }, el("b", { text: "persona" }), item.persona));
    if (item.scene) content.append(el("div", { class: "persona" }, el("b", { text: "scene" }), item.scene));
    const tr = el("div", { class: "transcript" });
    if (item.level === "dialogue") {
      for (const m of item.turns || item.context || []) tr.append(message(m.role, m.text, m.turn));
    } else {
      let last = 0;
      for (const m of item.context || []) {
        tr.append(message(m.role, m.text, m.turn));
        last = Math.max(last, Number(m.turn) || 0);
      }
      if (item.response !== null && item.response !== undefined) {
        tr.append(message(item.response_role || "assistant", item.response, last + 1, "rated"));
      }
    }
    content.append(tr);
    if (item.reference) {
      content.append(el("div", { class: "transcript" },
        el("div", { class: "msg reference", "data-role": "reference" }, el("span", { class: "who", text: "reference response" }), item.reference)));
    }
    box.append(content);
    document.body.dataset.item = item.item_id;
  }

  function renderProgress(p) {
    if (!p) return;
    state.progress = p;
    const handled = p.done + p.skipped;
    $("progress-text").textContent = `${p.done}/${p.total} done` + (p.skipped ? ` · ${p.skipped} skipped` : "") + (p.flagged ? ` · ${p.flagged} flagged` : "");
    $("progress-bar").style.width = p.total ? `${Math.min(100, (100 * handled) / p.total)}%` : "0";
    document.body.dataset.done = String(p.done);
  }

  function show(item, progress) {
    state.item = item;
    resetValues(item ? item.previous : null);
    closeFlag(true);
    renderProgress(progress);
    renderItem();
    renderFields();
    setBusy(false);
  }

  // -- actions ----------------------------------------------------------------------------------------
  async function loadNext() {
    const data = await call("GET", "next");
    show(data.item, data.progress);
  }

  async function send(skip) {
    if (!state.item || state.busy) return;
    if (!skip) {
      const m = missing();
      if (m.length) {
        showError(`label every dimension first (still to label: ${m.join(", ")})`);
        return;
      }
    }
    const flag = state.flagOpen && $("flag-text").value.trim() ? $("flag-text").value.trim() : null;
    const body = { item_id: state.item.item_id, labels: skip ? {} : { ...state.values }, skip: !!skip, flag };
    const key = JSON.stringify(body);
    if (!state.pending || state.pending.key !== key) state.pending = { key, id: newId() };
    body.submission_id = state.pending.id;
    setBusy(true);
    setStatus(skip ? "skipping…" : "saving…");
    try {
      const answer = await call("POST", "submit", body);
      renderProgress(answer.progress);
      showError("");
      setStatus(skip ? "skipped" : "saved");
      await loadNext();
    } catch (e) {
      showError(e.message);
      setStatus("");
      setBusy(false);
    }
  }

  async function undo() {
    if (state.busy) return;
    setBusy(true);
    try {
      const answer = await call("POST", "undo", {});
      showError("");
      if (answer.item) {
        show(answer.item, answer.progress);
        setStatus("reopened your last item");
      } else {
        renderProgress(answer.progress);
        setBusy(false);
        setStatus("nothing to undo");
      }
    } catch (e) {
      showError(e.message);
      setBusy(false);
    }
  }

  function openFlag() {
    state.flagOpen = true;
    $("flag-box").hidden = false;
    $("flag-toggle").setAttribute("aria-expanded", "true");
    $("flag-text").focus();
  }

  function closeFlag(clear) {
    state.flagOpen = clear ? false : state.flagOpen;
    if (clear) {
      $("flag-text").value = "";
      $("flag-box").hidden = true;
      $("flag-toggle").setAttribute("aria-expanded", "false");
    }
    $("flag-text").blur();
  }

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) {
      if (ev.key === "Enter" && ev.target.id === "flag-text") { ev.preventDefault(); send(false); }
      return;
    }
    const target = ev.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type !== "button"))) {
      if (ev.key === "Escape") target.blur();
      return;
    }
    const key = ev.key.toLowerCase();
    if (key === "enter") { ev.preventDefault(); send(false); return; }
    if (key === "s") { ev.preventDefault(); send(true); return; }
    if (key === "u") { ev.preventDefault(); undo(); return; }
    if (key === "f") { ev.preventDefault(); openFlag(); return; }
    if (!state.item || state.busy) return;
    const active = state.form.fields.find((f) => f.dimension === state.active);
    if (active) {
      const i = active.points.findIndex((p, j) => pointKey(active, p, j) === key);
      if (i >= 0) { ev.preventDefault(); choose(active, Number(active.points[i].value)); return; }
    }
    for (const f of state.form.fields) {
      if (f.kind === "binary" && toggleKey(f) === key) { ev.preventDefault(); toggle(f); return; }
    }
  }

  async function start() {
    $("form").addEventListener("submit", (ev) => { ev.preventDefault(); send(false); });
    $("skip").addEventListener("click", () => send(true));
    $("undo").addEventListener("click", () => undo());
    $("flag-toggle").addEventListener("click", () => (state.flagOpen ? closeFlag(true) : openFlag()));
    document.addEventListener("keydown", onKey);
    setBusy(true);
    try {
      state.form = await call("GET", "form");
      state.toggleKeys = assignToggleKeys(state.form.fields);
      renderForm();
      await loadNext();
      document.body.dataset.ready = "1";
    } catch (e) {
      showError(e.message);
      $("item").replaceChildren(el("p", { class: "muted", text: "This page cannot load its queue." }));
      document.body.dataset.ready = "error";
    }
  }

  start();
})();
