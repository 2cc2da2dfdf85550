"""``harness chatbot-eval``: evaluate chatbots the UPHELD way (App. B.1).

Held-out human conversations are cut before a human-written turn; the chatbot sees the history (the
last ``max_context`` turns) and generates the next turn, which judges score against the withheld
turn (the reference). UPHELD App. B.1 shows this way that a model fine-tuned on such conversations
scores about 40% higher than base models on content and style consistency.

The targets and their sources (JSONL dialogues, Topical-Chat, built or registered datasets) are
read by :func:`finetune.data.targets.load_targets`. Every model request goes through the request cache (temperature 0
unless the spec says otherwise): a rerun regenerates nothing. A verdict without a score (parse
failure, empty candidate) is counted, never scored 0.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from finetune.chatbot_eval_doc import SCHEMA_VERSION, validate_chatbot_eval
from finetune.data.targets import Target, load_targets
from harness.cache import CachedBackend, RequestCache, default_cache_path
from harness.provenance import environment, harness_info, redact
from harness.spec import JudgeSpec, SpecError, parse_spec
from harness.types import ChatMessage, GenerationConfig, Request, Response

RESULTS_FILE, SAMPLES_FILE = "results.json", "samples.parquet"
CHATBOT_KINDS = ("hf", "vllm", "openai", "replay")
#: LLM judges score every task, other judges (metric, embed, ...) the first task only. The UPHELD
#: content / style / reasonableness tasks share one App. H prompt (they differ in the human labels).
DEFAULT_TASKS = ("upheld-content",)


@dataclass
class ChatbotEvalConfig:
    models: list[str]
    data: str
    judges: list[str]
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    limit: int | None = None
    max_context: int | None = None
    output_dir: str | Path | None = None
    seed: int = 0
    max_tokens: int = 256
    system_prompt: str | None = None
    batch_size: int = 32
    n_bootstrap: int = 1000
    use_cache: bool = True
    cache_path: str | Path | None = None
    show_progress: bool = True


def requests_for(targets: list[Target], cfg: GenerationConfig, system_prompt: str | None) -> list[Request]:
    out = []
    for t in targets:
        msgs = [ChatMessage(m["role"], m["text"]) for m in t.context]
        if system_prompt and not any(m.role == "system" for m in msgs):
            msgs.insert(0, ChatMessage("system", system_prompt))
        out.append(Request(messages=tuple(msgs), config=cfg))
    return out


def mean_ci(vals: np.ndarray, n_bootstrap: int, seed: int, level: float = 0.95) -> list[float] | None:
    """Percentile-bootstrap CI of the mean (``n_bootstrap`` > 0), else a t-interval; None for n < 2."""
    from scipy import stats

    if vals.size < 2 or np.all(vals == vals[0]):  # no spread: a point interval (or none for n < 2)
        return [float(vals[0])] * 2 if vals.size >= 2 else None
    if n_bootstrap > 0:
        r = stats.bootstrap(
            (vals,),
            np.mean,
            n_resamples=n_bootstrap,
            method="percentile",
            confidence_level=level,
            rng=np.random.default_rng(seed),
        )
        return [float(r.confidence_interval.low), float(r.confidence_interval.high)]
    lo, hi = stats.t.interval(level, vals.size - 1, loc=vals.mean(), scale=stats.sem(vals))
    return [float(lo), float(hi)]


def summarize(scores: list[float | None], n_bootstrap: int, seed: int) -> dict[str, Any]:
    vals = np.array([s for s in scores if s is not None], dtype=np.float64)
    return {
        "mean": float(vals.mean()) if vals.size else None,
        "ci": mean_ci(vals, n_bootstrap, seed),
        "n": int(vals.size),
        "n_items": len(scores),
        "parse_failures": len(scores) - int(vals.size),
    }


def paired_difference(base: list, other: list, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Mean of ``other - base`` over the items both scored, its CI, and the relative change of the means."""
    both = [(b, o) for b, o in zip(base, other, strict=True) if b is not None and o is not None]
    pairs = np.array(both, dtype=np.float64).reshape(-1, 2)
    diff = relative = None
    if both:
        mb, mo = float(pairs[:, 0].mean()), float(pairs[:, 1].mean())
        diff, relative = mo - mb, (mo / mb - 1.0 if mb else None)
    return {
        "n": len(both),
        "diff": diff,
        "relative": relative,
        "ci": mean_ci(pairs[:, 1] - pairs[:, 0], n_bootstrap, seed),
    }


def _generate(cfg: ChatbotEvalConfig, targets, model_specs, cache, progress) -> tuple[dict, dict]:
    """Every model's candidates: one cached batch per model, backends created (and closed) one at a time."""
    from harness.backends.base import create_backend

    candidates, info = {}, {}
    for spec, js in model_specs.items():
        gen = js.generation_config(GenerationConfig(temperature=0.0, max_tokens=cfg.max_tokens))
        if gen.temperature > 0 and gen.seed is None:
            gen = gen.replace(seed=cfg.seed)
        bar = progress.add_task(f"generate {redact(spec)}", total=len(targets), rate="") if progress else None
        t0 = time.perf_counter()
        backend = create_backend(JudgeSpec(js.kind, js.target, js.revision, {}, dict(js.options)))
        try:

            def advance(i: int, r: Response, bar: Any = bar) -> None:
                progress.advance(bar)

            resps = CachedBackend(backend, cache).generate(
                requests_for(targets, gen, cfg.system_prompt), on_result=advance if progress else None
            )
            ident = backend.identity()
        finally:
            backend.close()
        candidates[spec] = resps
        info[redact(spec)] = {
            "identity": ident,
            "decoding": gen.to_dict(),
            "backend": backend.stats.to_dict(),
            "generation_cache_hits": sum(r.cached for r in resps),
            "empty_responses": sum(not r.text.strip() for r in resps),
            "seconds": round(time.perf_counter() - t0, 3),
        }
    return candidates, info


def _judge(
    cfg: ChatbotEvalConfig, targets, candidates, judge_specs, tasks, cache, progress
) -> tuple[dict, dict]:
    """Verdicts per (model, judge, task); each judge is loaded once and scores every model."""
    from harness.judges import load_judge

    verdicts, info = {}, {}
    for spec, js in judge_specs.items():
        judge = load_judge(js, cache, seed=cfg.seed)
        jtasks = tasks if js.kind in CHATBOT_KINDS else tasks[:1]
        try:
            for m, task in ((m, t) for m in cfg.models for t in jtasks):
                # a task without a template for the dialogue's language is judged with its English one
                langs = {t.language: t.language if t.language in task.templates else "en" for t in targets}
                items = [
                    {
                        "id": t.id,
                        "item_id": t.id,
                        "dataset": "chatbot-eval",
                        "language": langs[t.language],
                        "level": "turn",
                        "context": t.context,
                        "response": r.text.strip(),
                        "reference": t.reference,
                    }
                    for t, r in zip(targets, candidates[m], strict=True)
                ]
                name = f"judge {redact(m)} · {redact(spec)} · {task.name}"
                bar = progress.add_task(name, total=len(items), rate="") if progress else None
                out = []
                for i in range(0, len(items), cfg.batch_size):
                    out += judge.score(task, items[i : i + cfg.batch_size])
                    if progress:
                        progress.update(bar, completed=len(out))
                verdicts[(m, spec, task.name)] = out
            info[redact(spec)] = {
                "identity": judge.identity(),
                "backend": judge.backend_stats(),
                "usage": judge.usage.to_dict(),
                "tasks": {
                    t.name: {
                        "method": judge.method(t),
                        "decoding": judge.decoding(t),
                        "templates": {k: v.describe() for k, v in t.templates.items()},
                    }
                    for t in jtasks
                },
            }
        finally:
            judge.close()
    return verdicts, info


def run_chatbot_eval(cfg: ChatbotEvalConfig) -> dict[str, Any]:
    """Generate with every model, judge with every judge, write ``results.json`` + ``samples.parquet``
    into the output directory; returns the results document (plus ``output_dir``)."""
    from harness.run.runner import _progress, seed_everything
    from harness.tasks import get_task

    t_start = time.perf_counter()
    if not cfg.models or not cfg.judges:
        raise ValueError("give at least one --model and one --judge")
    for what, specs in (("--model", cfg.models), ("--judge", cfg.judges)):
        if dup := [s for s, n in Counter(specs).items() if n > 1]:
            raise ValueError(f"{what} given twice: {', '.join(dup)}")
    model_specs = {s: parse_spec(s) for s in cfg.models}  # bad specs fail before any work
    if bad := [s for s, js in model_specs.items() if js.kind not in CHATBOT_KINDS]:
        raise SpecError(f"--model {bad[0]!r} is not a chatbot backend: use {', '.join(CHATBOT_KINDS)}")
    judge_specs = {s: parse_spec(s) for s in cfg.judges}
    tasks = [get_task(n) for n in cfg.tasks]
    if bad := [t.name for t in tasks if t.level != "turn"]:
        raise ValueError(f"task(s) {bad} are not turn-level: chatbot-eval judges single turns")
    targets, data_info = load_targets(cfg.data, max_context=cfg.max_context, limit=cfg.limit, seed=cfg.seed)
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    out_dir = Path(cfg.output_dir or Path("runs") / f"{run_id}-chatbot-eval")
    seed_everything(cfg.seed)
    cache = RequestCache(cfg.cache_path or default_cache_path(), enabled=cfg.use_cache)
    try:
        with _progress(cfg.show_progress) as progress:
            candidates, models = _generate(cfg, targets, model_specs, cache, progress)
            verdicts, judges = _judge(cfg, targets, candidates, judge_specs, tasks, cache, progress)
    finally:
        cache_info = {
            "enabled": cache.enabled,
            "path": str(cache.path) if cache.enabled else None,
            **cache.stats.to_dict(),
        }
        cache.close()
    results: dict[str, Any] = {}  # model -> judge -> task -> summary
    first = cfg.models[0]
    for (m, j, task), vs in verdicts.items():
        scores = [v.score if v.ok else None for v in vs]  # None = no score (counted, never 0)
        entry = {
            **summarize(scores, cfg.n_bootstrap, cfg.seed),
            "statuses": dict(Counter(v.status for v in vs)),
        }
        if m != first:
            base = [v.score if v.ok else None for v in verdicts[(first, j, task)]]
            entry["vs_first"] = {
                "model": redact(first),
                **paired_difference(base, scores, cfg.n_bootstrap, cfg.seed),
            }
        results.setdefault(redact(m), {}).setdefault(redact(j), {})[task] = entry
    doc = {
        "schema_version": SCHEMA_VERSION,
        "run": {
            "id": run_id,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": redact(" ".join(sys.argv)),
            "seed": cfg.seed,
            "limit": cfg.limit,
            "max_context": cfg.max_context,
            "max_tokens": cfg.max_tokens,
            "system_prompt": cfg.system_prompt,
            "tasks": [t.name for t in tasks],
            "batch_size": cfg.batch_size,
            "n_bootstrap": cfg.n_bootstrap,
            "ci": "95% percentile bootstrap" if cfg.n_bootstrap > 0 else "95% t-interval",
            "n_items": len(targets),
        },
        "harness": harness_info(),
        "data": data_info,
        "models": models,
        "judges": judges,
        "results": results,
        "cache": cache_info,
        "timings": {"total_s": round(time.perf_counter() - t_start, 3)},
        "environment": environment(),
    }
    write_outputs(out_dir, doc, sample_rows(run_id, cfg.models, targets, candidates, verdicts))
    return {**doc, "output_dir": str(out_dir)}


def sample_rows(run_id: str, models: list[str], targets: list[Target], candidates, verdicts) -> list[dict]:
    """One row per model × target: the context, reference, candidate and every judge's verdict."""
    rows = []
    for m in models:
        for i, (t, r) in enumerate(zip(targets, candidates[m], strict=True)):
            js = [
                {
                    "judge": redact(j),
                    "task": task,
                    "score": v[i].score if v[i].ok else None,
                    "status": v[i].status,
                    "raw": v[i].raw,
                    "detail": v[i].detail,
                    "cached": bool(v[i].cached),
                }
                for (mm, j, task), v in verdicts.items()
                if mm == m
            ]
            rows.append(
                {
                    "run_id": run_id,
                    "model": redact(m),
                    "dialogue_id": t.dialogue_id,
                    "item_id": t.id,
                    "turn": t.turn,
                    "language": t.language,
                    "context": t.context,
                    "reference": t.reference,
                    "candidate": r.text.strip(),
                    "finish_reason": r.finish_reason,
                    "cached": bool(r.cached),
                    "prompt_tokens": r.usage.prompt_tokens,
                    "completion_tokens": r.usage.completion_tokens,
                    "judgments": js,
                }
            )
    return rows


def write_outputs(out_dir: str | Path, doc: dict[str, Any], rows: list[dict[str, Any]]) -> tuple[Path, Path]:
    """``samples.parquet`` (explicit Arrow schema) and ``results.json``, each written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.run.results import _atomic_write_bytes, _json_safe

    s, b, i64 = pa.string(), pa.bool_(), pa.int64()
    schema = pa.schema(
        [
            ("run_id", s),
            ("model", s),
            ("dialogue_id", s),
            ("item_id", s),
            ("turn", i64),
            ("language", s),
            ("context", pa.list_(pa.struct([("role", s), ("text", s)]))),
            ("reference", s),
            ("candidate", s),
            ("finish_reason", s),
            ("cached", b),
            ("prompt_tokens", i64),
            ("completion_tokens", i64),
            (
                "judgments",
                pa.list_(
                    pa.struct(
                        [
                            ("judge", s),
                            ("task", s),
                            ("score", pa.float64()),
                            ("status", s),
                            ("raw", s),
                            ("detail", s),
                            ("cached", b),
                        ]
                    )
                ),
            ),
        ]
    )
    out = Path(out_dir)
    validate_chatbot_eval(_json_safe(doc), where=str(out / RESULTS_FILE))  # never write a malformed document
    buf = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf)
    _atomic_write_bytes(out / SAMPLES_FILE, buf.getvalue().to_pybytes())
    payload = json.dumps(_json_safe(doc), indent=2, ensure_ascii=False, allow_nan=False)
    _atomic_write_bytes(out / RESULTS_FILE, payload.encode("utf-8"))
    return out / RESULTS_FILE, out / SAMPLES_FILE
