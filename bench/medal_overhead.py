"""MEDAL pipeline overhead: the harness's own cost per request (prompt building, request cache,
user-judge/verdict parsing, checkpoints, bookkeeping) with the replay backend over ≥ 100k requests.

The replay backend stands in for the models (every reply is distinct: ``unique``), so the time
spent inside it is measured separately and subtracted: overhead = (wall time of generation +
automatic labelling − time inside the backend) / requests. Goal: ≤ 1 ms per request.

    .venv/bin/python bench/medal_overhead.py                 # ~100k requests (default)
    .venv/bin/python bench/medal_overhead.py --scenes 20     # quick run

Writes bench/results/medal_overhead.json (committed: the tables in bench/README.md, README.md and
docs/medal-pipeline.md are rendered from it, ``--write-docs``; ``--docs-only`` rewrites them from
the committed JSON); exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODULE = "bench.medal_overhead"

GOAL_MS = 1.0
LANGS = ["zh", "en", "de", "fr", "pt", "es"]
RESULTS = ROOT / "bench" / "results" / "medal_overhead.json"


def markdown(r: dict) -> str:
    """bench/README.md: the run's table."""
    from bench.docs_tables import machine_line

    return "\n".join(
        [
            f"Last run ({machine_line(r['machine'])}; `--scenes {r['scenes']}`: {r['dialogues']:,} dialogues, "
            f"{r['turns']:,} turns):",
            "",
            "| requests | wall (s) | inside replay (s) | checkpoints (s) | overhead (ms/request) | goal | ratio |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {r['requests']:,} | {r['wall_s']:.1f} | {r['inside_backend_s']:.1f} | {r['checkpoint_s']:.1f} "
            f"| {r['overhead_ms_per_request']:.3f} | {r['goal_ms']} | {r['ratio_to_goal']:.2f} |",
        ]
    )


def sentence(r: dict) -> str:
    """docs/features.md / docs/medal-pipeline.md: one sentence."""
    return (
        f"The harness's own cost per request (prompt building, request cache, parsing, checkpoints, "
        f"bookkeeping) is {r['overhead_ms_per_request']:.2f} ms, far below model latency "
        f"(`bench/medal_overhead.py`: {r['requests']:,} replay requests, {r['dialogues']:,} dialogues, "
        f"{r['machine']['cpus']} CPUs at load {r['machine']['load_avg_start']:.1f}; goal ≤ {r['goal_ms']:g} ms)."
    )


def write_inputs(root: Path, n_scenes: int) -> Path:
    from dataset_builders.medal_labels import MEDAL_ISSUES

    scenes = [
        {
            "id": f"s{i}",
            "head": f"PersonX plans trip number {i}",
            "relation": "xWant",
            "tail": f"to visit place {i}",
        }
        for i in range(n_scenes)
    ]
    (root / "scenes.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scenes))
    personas = [
        {"input persona": f"A hobby photographer from town {i} who collects old maps."}
        for i in range(n_scenes)
    ]
    (root / "personas.jsonl").write_text("".join(json.dumps(p) + "\n" for p in personas))
    verdict = {k: {"label": 0, "comment": ""} for k in (*MEDAL_ISSUES, "other")}
    verdict["overall_quality_rating"] = {"label": 4, "comment": "Fine."}
    # one script per model (distinct files = distinct model identities, as distinct models have)
    scripts = {
        **{
            f"user{i}": [{"default": {"text": f"User {i}: my weekend plans are", "unique": True}}]
            for i in (1, 2)
        },
        **{
            f"bot{i}": [{"default": {"text": f"Bot {i}: that sounds lovely", "unique": True}}]
            for i in range(4)
        },
        "judge": [{"default": {"text": "Yes."}}],
        "labeller": [{"default": {"text": json.dumps(verdict)}}],
    }
    for name, rules in scripts.items():
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rules))
    cfg = {
        "languages": LANGS,
        "seeds": {"scenes": "scenes.jsonl", "personas": "personas.jsonl", "n_scenes": n_scenes},
        "models": {
            "users": {f"user-{i}": f"replay:{root / f'user{i}.jsonl'}" for i in (1, 2)},
            "chatbots": {f"bot-{i}": f"replay:{root / f'bot{i}.jsonl'}" for i in range(4)},
            "user_judge": f"replay:{root / 'judge.jsonl'}",
            "labeller": f"replay:{root / 'labeller.jsonl'}",
            "malformed_checker": "none",
        },
        "work_dir": "work",
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", type=int, default=155, help="scenes (× 6 languages × 2 users × 4 chatbots)")
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine

    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return 0
    where = machine()

    from dataset_builders.medal_pipeline.config import PipelineConfig
    from dataset_builders.medal_pipeline.generate import DialogueGenerator, ModelPool
    from dataset_builders.medal_pipeline.labels import label_dialogues
    from dataset_builders.medal_pipeline.pipeline import build_seeds
    from harness.backends.replay import ReplayBackend
    from harness.cache import RequestCache
    from harness.judges import load_judge

    inside = {"s": 0.0}
    original = ReplayBackend._generate

    def timed(self, requests, emit):
        t0 = time.perf_counter()
        try:
            return original(self, requests, emit)
        finally:
            inside["s"] += time.perf_counter() - t0

    ReplayBackend._generate = timed  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg = PipelineConfig.load(write_inputs(root, args.scenes))
        seeds = build_seeds(cfg)
        cache = RequestCache(cfg.cache_path)
        t0 = time.perf_counter()
        pool = ModelPool(cache)
        gen = DialogueGenerator(cfg, seeds, pool, cfg.work, progress=False)
        state = gen.run()
        t_gen = time.perf_counter() - t0
        dialogues = [d for d in state.dialogues if d.turns]
        judge = load_judge(cfg.models.labeller, cache)
        t1 = time.perf_counter()
        labels = label_dialogues(dialogues, judge, batch_size=256, progress=False)
        t_label = time.perf_counter() - t1
        wall = time.perf_counter() - t0
        n_gen = state.counters["requests"]
        requests = n_gen + len(labels)
        backend_requests = (
            sum(b.backend.stats.requests for b in pool._backends.values()) + judge.backend.stats.requests
        )
        overhead_ms = 1000 * (wall - inside["s"]) / requests
        out = {
            "machine": where,
            "scenes": args.scenes,
            "seed_contexts": len(seeds),
            "dialogues": len(dialogues),
            "turns": sum(len(d.turns) for d in dialogues),
            "requests": requests,
            "backend_requests": backend_requests,
            "wall_s": round(wall, 2),
            "generation_s": round(t_gen, 2),
            "labelling_s": round(t_label, 2),
            "inside_backend_s": round(inside["s"], 2),
            "checkpoint_s": round(gen.timing["checkpoint"], 2),
            "checkpoint_mb": round((cfg.work / "state.json").stat().st_size / 2**20, 1),
            "cache_mb": round(cfg.cache_path.stat().st_size / 2**20, 1),
            "overhead_ms_per_request": round(overhead_ms, 4),
            "wall_ms_per_request": round(1000 * wall / requests, 4),
            "goal_ms": GOAL_MS,
            "ratio_to_goal": round(overhead_ms / GOAL_MS, 3),
            "labels_ok": sum(lab.status == "ok" for lab in labels),
        }
        cache.close()
    w = max(len(k) for k in out)
    for k, v in out.items():
        print(f"{k:<{w}}  {v}")
    finish(args, MODULE, out)
    ok = overhead_ms <= GOAL_MS
    print(f"\nharness overhead {overhead_ms:.3f} ms/request vs goal {GOAL_MS} ms: {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
