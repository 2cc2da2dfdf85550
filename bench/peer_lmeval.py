"""Benchmark: xDial-Eval P(Yes) through our `hf` judge vs lm-evaluation-harness's HF model, side by side.

    python bench/peer_lmeval.py [--source ../shared/data/xdial-eval] [--n 600] [--batch-size 16]
                                [--repeats 5] [--threads 1] [--lmeval-python .venv-lmeval/bin/python]

Same requests on both sides: turn-level xDial-Eval items (all 10 languages, a fixed random sample),
rendered with the xdial-eval-turn prompt and the model's chat template, labels "Yes"/"No"; the same
tiny random Qwen2 model (the test fixture, saved to a temp dir), the same batch size, CPU, float32,
the same torch thread count.

* ours: ``LLMJudge.score`` of an ``hf:`` judge on the items (prompt rendering, cold request cache in
  a fresh SQLite file each repeat, batched scoring, verdict parsing);
* lm-eval: ``HFLM(pretrained=<dir>).apply_chat_template`` of the same chats + ``HFLM.loglikelihood``
  on ``Instance`` s with continuations "Yes" and "No" (its one-token-continuation logits cache on,
  the default), P(Yes) = e^y / (e^y + e^n).

lm-eval runs in its own virtualenv (it pins other packages than ours), in a subprocess that stays
up, so model loading is outside the timing on both sides and the repeats alternate ours / lm-eval
(machine load hits both alike). Before timing, the token ids lm-eval scores (``_encode_pair``:
context + continuation) are checked to equal ours (prompt ids + label id) for every request.
Reports items/s of each (median of the repeats), their ratio and max |ΔP(Yes)|.
Goal: ours >= 1.0x lm-eval's items/s with max |ΔP(Yes)| <= 1e-4 (exit 1 on a miss).

One-time setup of the lm-eval venv (torch pinned to the repo's CPU wheel)::

    python3 -m venv .venv-lmeval
    .venv-lmeval/bin/pip install -c constraints.txt "lm_eval[hf]>=0.4,<0.5"

Appends its run to bench/results/peer_lmeval.json (committed; the last ``KEEP`` runs, each with the
load average at its start) and, with ``--write-docs``, renders the runs table of bench/README.md and
the summary sentence of docs/features.md from it (``--docs-only`` rewrites them from the committed JSON);
the full detail goes to ``--out`` (bench/out/, git-ignored).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
DEFAULT_LMEVAL_PYTHON = ROOT / ".venv-lmeval" / "bin" / "python"
LABELS = ("Yes", "No")
RESULTS = ROOT / "bench" / "results" / "peer_lmeval.json"
MODULE = "bench.peer_lmeval"
KEEP = 4  # runs kept in RESULTS


def markdown(r: dict) -> str:
    """bench/README.md: one row per kept run."""
    lines = [
        "| date | load average at start | items | ours (hf judge) items/s | lm-eval items/s | ours / lm-eval "
        "| max \\|ΔP(Yes)\\| | per-repeat seconds, ours | per-repeat seconds, lm-eval |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for run in r["runs"]:
        m = run["machine"]
        lines.append(
            f"| {m['date']} | {m['load_avg_start']:.1f} | {run['items']} | {run['ours_items_per_s']:.1f} "
            f"| {run['lmeval_items_per_s']:.1f} | **{run['ratio']:.2f}** | {run['max_abs_delta_p_yes']:.1e} "
            f"| {' '.join(f'{s:.2f}' for s in run['ours_seconds'])} "
            f"| {' '.join(f'{s:.2f}' for s in run['lmeval_seconds'])} |"
        )
    last = r["runs"][-1]
    lines += [
        "",
        f"Last run: lm_eval {last['lm_eval']}, torch {last['torch']}, batch {last['batch_size']}, "
        f"{last['threads']} torch thread(s), {last['repeats']} alternating repeats, "
        f"{len(last['languages'])} languages; the same {last['items'] * len(LABELS):,} (item, label) token-id "
        f"sequences on both sides.",
    ]
    return "\n".join(lines)


def sentence(r: dict) -> str:
    """docs/features.md: one sentence about the last run."""
    last = r["runs"][-1]
    return (
        f"On CPU our `hf` P(Yes) judge scores xDial-Eval at {last['ratio']:.2f}× the items/s of "
        f"lm-evaluation-harness's HF model on the same requests and token ids (max |ΔP(Yes)| "
        f"{last['max_abs_delta_p_yes']:.1e}; `bench/peer_lmeval.py`, {last['items']} items, "
        f"{last['machine']['date']})."
    )


# -- the lm-eval side (runs in the lm-eval venv; imports nothing from this repo) --------------------
def peer_worker(job_path: str) -> None:
    """Load HFLM once, report the token ids it scores, then run one timed pass per "run" line on stdin."""
    job = json.loads(Path(job_path).read_text())
    import torch

    torch.set_num_threads(job["threads"])
    import lm_eval
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(
        pretrained=job["model"],
        device="cpu",
        dtype="float32",
        batch_size=job["batch_size"],
        logits_cache=True,
    )
    chats, labels = job["chats"], job["labels"]

    def instances(contexts: list[str]) -> list:
        return [
            Instance("loglikelihood", doc={}, arguments=(ctx, lab), idx=j)
            for ctx in contexts
            for j, lab in enumerate(labels)
        ]

    # the token ids lm-eval scores per (item, label): context ids + continuation ids
    contexts = [lm.apply_chat_template(c) for c in chats]
    pairs = [lm._encode_pair(ctx, lab) for ctx in contexts for lab in labels]
    lm.loglikelihood(instances(contexts[: job["batch_size"]]), disable_tqdm=True)  # warm-up
    ready = {"ready": True, "lm_eval": lm_eval.__version__, "torch": torch.__version__}
    ready["scored_ids"] = [[list(c), list(k)] for c, k in pairs]
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t = time.perf_counter()
        contexts = [lm.apply_chat_template(c) for c in chats]
        out = lm.loglikelihood(instances(contexts), disable_tqdm=True)
        dt = time.perf_counter() - t
        lls = [float(ll) for ll, _ in out]
        print(json.dumps({"seconds": dt, "loglikelihoods": lls}), flush=True)


# -- our side ----------------------------------------------------------------------------------------
def sample_items(source: Path, n: int, seed: int) -> list[dict]:
    from harness.data.resolve import load_items, prepare_dataset
    from tasks.xdial_eval import TURN_CONFIGS

    handle = prepare_dataset("xdial-eval", source=source, show_progress=False)
    pool = [it for cfg in TURN_CONFIGS if cfg in handle.configs for it in load_items(handle, cfg)]
    pool = [it for it in pool if it.get("context") and it.get("response")]
    return random.Random(seed).sample(pool, min(n, len(pool)))


def ours_pass(judge, task, items: list[dict], cache_path: Path) -> tuple[float, list[float]]:
    from harness.cache import CachedBackend, RequestCache

    cache = RequestCache(cache_path)
    judge.cached = CachedBackend(judge.backend, cache)
    t = time.perf_counter()
    verdicts = judge.score(task, items)
    dt = time.perf_counter() - t
    cache.close()
    return dt, [v.score for v in verdicts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--n", type=int, default=600, help="xDial-Eval turn-level items (a fixed random sample)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5, help="timed passes per side, alternating")
    ap.add_argument("--threads", type=int, default=1, help="torch threads, both sides")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lmeval-python", type=Path, default=DEFAULT_LMEVAL_PYTHON)
    ap.add_argument("--peer-worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "peer_lmeval.json")
    if "--peer-worker" in sys.argv:  # inside the lm-eval venv: nothing from this repo
        args = ap.parse_args()
        peer_worker(args.peer_worker)
        return
    sys.path.insert(0, str(ROOT))
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine, previous

    add_docs_options(ap, MODULE)
    args = ap.parse_args()
    if handle_docs_only(args, MODULE):
        return
    where = machine()
    if not args.source.is_dir():
        sys.exit(f"xDial-Eval source not found: {args.source} (pass --source)")
    if not args.lmeval_python.is_file():
        sys.exit(
            f"lm-eval venv python not found: {args.lmeval_python}; one-time setup: python3 -m venv "
            '.venv-lmeval && .venv-lmeval/bin/pip install -c constraints.txt "lm_eval[hf]>=0.4,<0.5"'
        )

    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    from harness.cache import RequestCache
    from harness.judges.llm import LLMJudge
    from harness.spec import parse_spec
    from harness.tasks import get_task
    from harness.types import Request
    from tests.fixtures.tiny_models import build_tiny_causal_lm

    work = Path(tempfile.mkdtemp(prefix="dialeval-peer-"))
    model = build_tiny_causal_lm(work / "model", "qwen2")
    items = sample_items(args.source, args.n, args.seed)
    task = get_task("xdial-eval-turn")
    assert tuple(task.scorer.labels) == LABELS
    judge = LLMJudge(
        parse_spec(f"hf:{model},device=cpu,dtype=float32,batch_size={args.batch_size}"),
        RequestCache(work / "warm.sqlite"),
        seed=0,
    )
    cfg = judge.generation_config(task)
    requests = [task.build_request(it, cfg) for it in items]
    be = judge.backend
    our_ids = [be.encode_prompt(be.render_prompt(r)) for r in requests]
    fits = [len(ids) < be.max_positions for ids in our_ids]  # the tiny model has 2,048 positions
    if not all(fits):
        print(f"  {fits.count(False)} of {len(items)} prompts longer than {be.max_positions} tokens left out")
        items, requests, our_ids = (
            [x for x, f in zip(xs, fits, strict=True) if f] for xs in (items, requests, our_ids)
        )
    label_ids = {lab: be.tokenizer(lab, add_special_tokens=False)["input_ids"] for lab in LABELS}
    be.generate([Request(requests[0].messages, cfg, choices=LABELS)])  # load + warm up outside the timing

    job = {
        "model": str(model),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "labels": list(LABELS),
        "chats": [[m.to_dict() for m in r.messages] for r in requests],
    }
    (work / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    peer = subprocess.Popen(
        [str(args.lmeval_python), str(Path(__file__).resolve()), "--peer-worker", str(work / "job.json")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(work),
    )

    def peer_line() -> dict:
        while True:
            line = peer.stdout.readline()
            if not line:
                sys.exit(f"lm-eval worker exited ({peer.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    ready = peer_line()
    # the same token ids on both sides: lm-eval's context + continuation == our prompt + label
    mism = 0
    for k, (ctx, cont) in enumerate(ready["scored_ids"]):
        i, lab = divmod(k, len(LABELS))
        if ctx + cont != our_ids[i] + label_ids[LABELS[lab]]:
            mism += 1
    if mism:
        sys.exit(f"{mism} of {len(ready['scored_ids'])} lm-eval requests score other token ids than ours")
    cont_lens = sorted({len(cont) for _, cont in ready["scored_ids"]})

    ours_s, peer_s, ours_p, peer_p = [], [], None, None
    for rep in range(args.repeats):
        for side in ("ours", "peer") if rep % 2 == 0 else ("peer", "ours"):
            if side == "ours":
                dt, ours_p = ours_pass(judge, task, items, work / f"cache-{rep}.sqlite")
                ours_s.append(dt)
            else:
                peer.stdin.write("run\n")
                peer.stdin.flush()
                res = peer_line()
                peer_s.append(res["seconds"])
                lls = res["loglikelihoods"]
                peer_p = [1.0 / (1.0 + math.exp(lls[2 * i + 1] - lls[2 * i])) for i in range(len(items))]
            print(
                f"  repeat {rep + 1} {side}: {(ours_s if side == 'ours' else peer_s)[-1]:.2f} s", flush=True
            )
    peer.stdin.write("quit\n")
    peer.stdin.flush()
    peer.wait(timeout=60)
    judge.close()

    n = len(items)
    ours_ips, peer_ips = n / statistics.median(ours_s), n / statistics.median(peer_s)
    ratio = ours_ips / peer_ips
    max_d = max(abs(a - b) for a, b in zip(ours_p, peer_p, strict=True))
    spread = max(ours_p) - min(ours_p)
    ok = ratio >= 1.0 and max_d <= 1e-4
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    summary = {
        "items": n,
        "languages": sorted({it["language"] for it in items}),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "lm_eval": ready["lm_eval"],
        "torch": ready["torch"],
        "lmeval_continuation_tokens": cont_lens,
        "ours_seconds": ours_s,
        "lmeval_seconds": peer_s,
        "ours_items_per_s": ours_ips,
        "lmeval_items_per_s": peer_ips,
        "ratio": ratio,
        "max_abs_delta_p_yes": max_d,
        "p_yes_spread": spread,
        "loadavg_after": load,
        "goal_met": ok,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    committed = previous(args, MODULE, {"runs": []})
    committed["runs"] = [*committed["runs"], {"machine": where, **summary}][-KEEP:]
    finish(args, MODULE, committed)
    print(
        f"\nxDial-Eval P(Yes), {n} turn-level items ({len(summary['languages'])} languages), tiny Qwen2, "
        f"batch {args.batch_size}, {args.threads} thread(s), CPU; median of {args.repeats} alternating repeats"
    )
    print(f"{'':12} {'items/s':>9} {'seconds':>24}")
    print(f"{'ours (hf)':12} {ours_ips:9.1f} {' '.join(f'{s:.2f}' for s in ours_s):>24}")
    print(f"{'lm-eval ' + ready['lm_eval']:12} {peer_ips:9.1f} {' '.join(f'{s:.2f}' for s in peer_s):>24}")
    print(
        f"ours / lm-eval items/s = {ratio:.3f} (goal >= 1.0); max |dP(Yes)| = {max_d:.2e} (goal <= 1e-4); "
        f"P(Yes) spread {spread:.3f}; same token ids on both sides ({n * len(LABELS)} requests); "
        f"load average after: {' '.join(load)}"
    )
    print("goal met" if ok else "GOAL MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
