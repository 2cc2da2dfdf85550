"""Benchmark: how `harness datasets build` and `harness run` grow with the item count.

    python bench/scaling/scale.py [--sizes 10000,100000,1000000] [--bootstrap 1000] [--write-docs]
    python bench/scaling/scale.py --docs-only          # rewrite the docs table from bench/results/scale.json

For each size N it writes synthetic xDial-Eval-format CSVs (the 18 sets of Table 1, instances in the
paper's proportions, 10 languages, so N items = N/10 source rows; texts are pseudo-words in each
language's script, ratings random), then, each in its own child process:

* ``harness datasets build xdial-eval --source SRC --output DIR`` (the builder, CSV to Parquet);
* ``harness run --task xdial-eval-turn,xdial-eval-dialogue --dataset DIR --judge replay:FILE``, a
  replay judge answering every request with a P(Yes) from a hash of the prompt, through a fresh
  request cache, with ``--bootstrap`` resamples (default 1000, the CLI's default).

It records each child's wall time, CPU time and peak RSS (``os.wait4``: ``ru_utime + ru_stime`` and
``ru_maxrss``, the child's own high-water mark, file-backed pages included), the machine's load
average while it ran, the run's items/s and its per-phase timings (results.json), and
prints the growth side by side — ratios to the smallest size — with the goals: peak RSS of
the run ≤ 1.5 GB at 1M items and ≤ 2× the 10k figure, time per item flat (≤ 1.3× from 10k to 1M).
"Time per item" is the run's item-proportional work (results.json's total time less loading the
judge: reading the items, scoring, writing samples, meta-evaluation); the end-to-end wall time, which
also holds the process start (imports, ~seconds), is shown next to it.
Timings on a shared machine vary: compare the ratios of one run, and the CPU time per item (less the
CLI's import, measured alone), which the machine's load hardly moves. Writes bench/results/scale.json;
``--write-docs`` puts the table into docs/scaling.md between its markers.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `python bench/scaling/scale.py` from anywhere
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "scale.json"
DOC = ROOT / "docs" / "scaling.md"
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
GOAL_RSS_MB, GOAL_RSS_RATIO, GOAL_TIME_RATIO = 1500.0, 2.0, 1.3

#: one alphabet per language, from which each language's pseudo-words are drawn
SCRIPTS = {
    "en": "abcdefghijklmnoprstuvwy",
    "zh": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "es": "abcdefghijlmnopqrstuvzáéíóñ",
    "de": "abcdefghiklmnoprstuwzäöüß",
    "fr": "abcdefghijlmnopqrstuvéèàç",
    "ja": "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめも",
    "ko": "가나다라마바사아자차카타파하고노도로모보소오조초",
    "hi": "कखगघचछजझटठडढतथदधनपफबभमयरलवशसह",
    "ar": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "ru": "абвгдежзийклмнопрстуфхцчшщыэюя",
}
WORDLESS = ("zh", "ja")  # no spaces between words


def _bank(lang: str, rng: random.Random, n: int = 400) -> list[str]:
    letters = SCRIPTS[lang]
    lo, hi = (1, 3) if lang in WORDLESS else (2, 9)
    return ["".join(rng.choice(letters) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def _utterance(bank: list[str], rng: random.Random, lang: str) -> str:
    words = rng.choices(bank, k=rng.randint(5, 18))
    return ("" if lang in WORDLESS else " ").join(words)


def write_source(root: Path, n_items: int, seed: int = 0) -> dict[str, int]:
    """Synthetic xDial-Eval CSVs for ``n_items`` items (rows × 10 languages) under ``root``
    (``turn/<stem>.csv``, ``dial/<stem>.csv``, the upstream layout). Returns rows per set."""
    from dataset_builders.helpers import LANGUAGE_NAMES
    from dataset_builders.xdial_eval import XDIAL_SETS

    langs = list(LANGUAGE_NAMES)
    rows_total = max(n_items // len(langs), len(XDIAL_SETS) * 3)
    weights = [s.instances for s in XDIAL_SETS]
    counts = [max(3, rows_total * w // sum(weights)) for w in weights]
    # exact total: the rounding remainder goes to the largest set; what the 3-row minimum adds
    # (small N) comes off the largest sets, none going below 3
    extra = rows_total - sum(counts)
    counts[weights.index(max(weights))] += max(extra, 0)
    for _ in range(-extra):
        counts[counts.index(max(counts))] -= 1
    rng = random.Random(seed)
    banks = {lang: _bank(lang, rng) for lang in langs}
    out: dict[str, int] = {}
    for s, n in zip(XDIAL_SETS, counts, strict=True):
        path = root / s.upstream_dir / f"{s.stem}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        suffixes = ("ctx", "res") if s.level == "turn" else ("dial",)
        header = [f"{LANGUAGE_NAMES[lang]}_{x}" for lang in langs for x in suffixes] + ["ratings"]
        with path.open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            for _ in range(n):
                k = rng.randint(1, 5) if s.level == "turn" else rng.randint(6, 12)
                cells = []
                for lang in langs:
                    utts = [_utterance(banks[lang], rng, lang) for _ in range(k)]
                    if s.level == "turn":
                        cells += ["\n".join(utts), _utterance(banks[lang], rng, lang)]
                    else:
                        cells.append("\n" + "\n".join(utts))
                w.writerow([*cells, f"{rng.uniform(1, 5):.2f}"])
        out[s.stem] = n
    return out


def _child(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run ``cmd``; its wall time, CPU time (user + system, all its threads) and peak RSS (MB), from
    ``os.wait4``, and the machine's 1-minute load average sampled every 2 s while it ran (mean and
    max; the machine may be shared: read wall times with it, CPU times hardly depend on it)."""
    loads = [os.getloadavg()[0]]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(2.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    stop.set()
    sampler.join()
    loads.append(os.getloadavg()[0])
    if p.returncode != 0:
        sys.stderr.write(err.decode(errors="replace")[-4000:])
        raise SystemExit(f"{' '.join(cmd[:5])} ... failed with exit status {p.returncode}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "load_avg_mean": sum(loads) / len(loads),
        "load_avg_max": max(loads),
    }


def measure(n_items: int, work: Path, bootstrap: int, keep: bool = False) -> dict[str, object]:
    work.mkdir(parents=True, exist_ok=True)
    src, data, out = work / "src", work / "dataset", work / "run"
    for p in (data, out):
        shutil.rmtree(p, ignore_errors=True)
    if not (src / "done").is_file():
        shutil.rmtree(src, ignore_errors=True)
        t = time.perf_counter()
        write_source(src, n_items)
        (src / "done").write_text(f"{time.perf_counter() - t:.1f}\n")
    judge = work / "judge.jsonl"
    judge.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n", encoding="utf-8")
    env = {
        **os.environ,
        "DIALEVAL_HOME": str(work / "home"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cli = [sys.executable, "-m", "harness.cli"]
    idle = _child([sys.executable, "-c", "import harness.cli.app"], env)
    build = _child(
        [*cli, "datasets", "build", "xdial-eval", "--source", str(src), "--output", str(data), "-q"], env
    )
    cache = work / "cache.sqlite"
    cache.unlink(missing_ok=True)
    run_cmd = [*cli, "run", "--task", "xdial-eval-turn,xdial-eval-dialogue", "--dataset", str(data)]
    run_cmd += ["--judge", f"replay:{judge}", "--cache", str(cache), "--bootstrap", str(bootstrap)]
    run = _child([*run_cmd, "--output", str(out), "-q"], env)
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    timings = res["timings"]
    n = int(res["run"]["n_items"])
    # item-proportional work: everything but loading the judge (dataset planning / loading, scoring,
    # reading items and writing samples, meta-evaluation, writing results)
    work_s = timings["total_s"] - timings["load_judge_s"]
    row = {
        "items": n,
        "import_rss_mb": idle["peak_rss_mb"],
        "import_cpu_s": idle["cpu_s"],
        "build": {**build, "us_per_item": 1e6 * build["wall_s"] / n},
        "run": {
            **run,
            "items_per_s": n / run["wall_s"],
            "scoring_items_per_s": n / timings["scoring_s"],
            "us_per_item": 1e6 * work_s / n,
            # CPU time per item, less the process's fixed start (importing the CLI, measured alone)
            "cpu_us_per_item": 1e6 * max(run["cpu_s"] - idle["cpu_s"], 0.0) / n,
            # the phases: judging (with reading the items and writing the samples), statistics
            "us_per_item_scoring": 1e6 * (timings["scoring_s"] + timings.get("samples_io_s", 0.0)) / n,
            "us_per_item_meta": 1e6 * timings["meta_eval_s"] / n,
            "timings": {k: v for k, v in timings.items() if k.endswith("_s")},
        },
        "pearson_all": res["results"]["xdial-eval-turn"]["all"]["pearson"]["value"],
    }
    if not keep:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        cache.unlink(missing_ok=True)
    return row


def summary(rows: list[dict]) -> dict[str, object]:
    base, top = rows[0], rows[-1]
    r = {
        "rss_ratio": top["run"]["peak_rss_mb"] / base["run"]["peak_rss_mb"],
        "time_per_item_ratio": top["run"]["us_per_item"] / base["run"]["us_per_item"],
        "build_rss_ratio": top["build"]["peak_rss_mb"] / base["build"]["peak_rss_mb"],
        "build_time_per_item_ratio": top["build"]["us_per_item"] / base["build"]["us_per_item"],
    }
    if "cpu_us_per_item" in top["run"] and "cpu_us_per_item" in base["run"]:
        r["cpu_per_item_ratio"] = top["run"]["cpu_us_per_item"] / base["run"]["cpu_us_per_item"]
    r["goals"] = {
        f"peak RSS at {top['items']:,} items <= {GOAL_RSS_MB:.0f} MB": top["run"]["peak_rss_mb"]
        <= GOAL_RSS_MB,
        f"peak RSS <= {GOAL_RSS_RATIO:g}x the {base['items']:,}-item run": r["rss_ratio"] <= GOAL_RSS_RATIO,
        f"time per item <= {GOAL_TIME_RATIO:g}x the {base['items']:,}-item run": r["time_per_item_ratio"]
        <= GOAL_TIME_RATIO,
    }
    if "cpu_per_item_ratio" in r:  # the same goal in CPU time, which a shared machine's load hardly moves
        r["goals"][f"CPU time per item <= {GOAL_TIME_RATIO:g}x the {base['items']:,}-item run"] = (
            r["cpu_per_item_ratio"] <= GOAL_TIME_RATIO
        )
    return r


def markdown(r: dict) -> str:
    rows = r["sizes"]
    base = rows[0]

    def ratio(x: dict, key: str) -> str:
        v, b = x["run"].get(key), base["run"].get(key)
        return f"{v / b:.2f}×" if v is not None and b else "–"

    def num(v: float | None) -> str:
        return "–" if v is None else f"{v:,.0f}"

    lines = [
        f"Measured by `python bench/scaling/scale.py` ({r['machine']}; replay judge, synthetic xDial-Eval-format data, "
        f"18 sets × 10 languages, {r['bootstrap']} bootstrap resamples; each step a child process, peak RSS = "
        "its `ru_maxrss`; µs/item = the run's time less loading the judge, split into judging (reading "
        "items, scoring, writing samples) and statistics; CPU µs/item = the run's CPU time (user + system, "
        "all threads) less the CLI's import, per item; load = the machine's 1-minute load average while the "
        "run ran, mean (max); ratios to the smallest size):",
        "",
        "| items | build: wall | build: peak RSS | run: wall | run: items/s | µs/item: judging "
        "| µs/item: statistics | µs/item | CPU µs/item | run: peak RSS | RSS ratio | µs/item ratio "
        "| CPU µs/item ratio | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in rows:
        run = x["run"]
        load = f"{run['load_avg_mean']:.1f} ({run['load_avg_max']:.1f})" if "load_avg_mean" in run else "–"
        lines.append(
            f"| {x['items']:,} | {x['build']['wall_s']:.0f} s | {x['build']['peak_rss_mb']:.0f} MB | "
            f"{run['wall_s']:.0f} s | {run['items_per_s']:,.0f} | {num(run.get('us_per_item_scoring'))} | "
            f"{num(run.get('us_per_item_meta'))} | {run['us_per_item']:,.0f} | "
            f"{num(run.get('cpu_us_per_item'))} | {run['peak_rss_mb']:.0f} MB | "
            f"{run['peak_rss_mb'] / base['run']['peak_rss_mb']:.2f}× | {ratio(x, 'us_per_item')} | "
            f"{ratio(x, 'cpu_us_per_item')} | {load} |"
        )
    lines += [
        "",
        "Goals: "
        + "; ".join(f"{k}: **{'met' if v else 'not met'}**" for k, v in r["summary"]["goals"].items())
        + ".",
    ]
    if r.get("before"):
        b = r["before"]
        lines += [
            "",
            f"Before streaming ({b.get('label') or 'the code before'}; same bench, {b['machine']}): "
            + "; ".join(
                f"{x['items']:,} items: run peak RSS {x['run']['peak_rss_mb']:.0f} MB, "
                f"build peak RSS {x['build']['peak_rss_mb']:.0f} MB"
                for x in b["sizes"]
            )
            + f" (RSS ratio {b['sizes'][-1]['run']['peak_rss_mb'] / b['sizes'][0]['run']['peak_rss_mb']:.2f}× "
            f"for {b['sizes'][-1]['items'] // b['sizes'][0]['items']}× the items).",
        ]
    return "\n".join(lines)


def write_docs(r: dict) -> None:
    from bench.docs_tables import replace_between_markers

    replace_between_markers(DOC, "scale", markdown(r))


def _table(rows: list[dict]) -> str:
    base = rows[0]
    head = (
        f"{'items':>9} | {'build s':>8} {'build MB':>9} | {'run s':>7} {'items/s':>8} {'µs/item':>8} "
        f"{'CPU µs':>7} {'run MB':>8} | {'RSS×':>5} {'µs×':>5} {'CPU×':>5} | {'load':>5} | {'import MB':>9}"
    )
    out = [head, "-" * len(head)]
    for x in rows:
        run, b = x["run"], base["run"]
        out.append(
            f"{x['items']:>9,} | {x['build']['wall_s']:>8.1f} {x['build']['peak_rss_mb']:>9.0f} | "
            f"{run['wall_s']:>7.1f} {run['items_per_s']:>8.0f} {run['us_per_item']:>8.0f} "
            f"{run.get('cpu_us_per_item', math.nan):>7.0f} {run['peak_rss_mb']:>8.0f} | "
            f"{run['peak_rss_mb'] / b['peak_rss_mb']:>5.2f} {run['us_per_item'] / b['us_per_item']:>5.2f} "
            f"{run.get('cpu_us_per_item', math.nan) / b.get('cpu_us_per_item', math.nan):>5.2f} | "
            f"{run.get('load_avg_mean', math.nan):>5.1f} | {x['import_rss_mb']:>9.0f}"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="item counts, comma-separated")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the runs")
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "scale")
    ap.add_argument("--keep", action="store_true", help="keep the built datasets and run outputs")
    ap.add_argument("--label", default="", help="a note stored with the results (e.g. the code version)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where to write the JSON")
    ap.add_argument(
        "--before", type=Path, help="a JSON this bench wrote on the code before a change: kept as 'before'"
    )
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/scaling.md")
    ap.add_argument("--docs-only", action="store_true", help="rewrite the docs from bench/results/scale.json")
    args = ap.parse_args()
    if args.docs_only:
        write_docs(json.loads(RESULTS.read_text("utf-8")))
        return
    sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(","))
    rows = []
    for n in sizes:
        print(f"[{n:,} items] ...", flush=True)
        rows.append(measure(n, args.work / f"n{n}", args.bootstrap, args.keep))
        print(_table(rows), flush=True)
    previous = json.loads(args.results.read_text("utf-8")) if args.results.is_file() else {}
    if args.before is not None:
        b = json.loads(args.before.read_text("utf-8"))
        previous["before"] = {k: b[k] for k in ("machine", "label", "bootstrap", "sizes") if k in b}
    r = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "label": args.label,
        "bootstrap": args.bootstrap,
        "sizes": rows,
        "summary": summary(rows),
        **({"before": previous["before"]} if "before" in previous else {}),
    }
    print()
    print(_table(rows))
    for k, v in r["summary"]["goals"].items():
        print(f"  {'OK ' if v else 'NO '} {k}")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(r, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.write_docs:
        write_docs(r)


if __name__ == "__main__":
    main()
