"""`harness view` at scale: a synthetic run of 1M samples (12 datasets × 10 languages, 3 annotators
per item, the transcripts in a dataset directory beside it), served by the real viewer on 127.0.0.1
and queried over HTTP the way the page does.

Goals: the first page of the samples browser in < 1 s, a filter or a sort in < 2 s.
Every row of the table is one HTTP request to the running server (JSON included), timed from a
fresh viewer process-state: new DuckDB connection, no derived index in memory, three times: the first
open of the run (its indexes building in the background), a reopening (indexes read from the cache)
and a reopening whose indexes are loaded before the requests. Each request's CPU seconds (of the
whole process: the server, DuckDB's threads) are recorded beside its wall time, and the machine's
load average: on a shared machine the CPU time is what stays comparable.

    .venv/bin/python bench/viewer/scale.py                  # 1,000,000 samples (~1 min to generate)
    .venv/bin/python bench/viewer/scale.py --rows 100000    # quicker

The data are written once under bench/out/viewer_scale/<rows>/ (git-ignored) and reused. Prints one
table (seconds, goal, seconds / goal) and writes bench/results/viewer_scale.json; exits 1 when a goal
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LANGS = ["en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru"]
WORDS = {
    "en": "the a movie trip weekend cat coffee book music friend really great idea maybe".split(),
    "zh": "我 你 电影 周末 咖啡 朋友 真的 很 好 想法 也许 音乐 书".split(),
    "es": "el la película viaje fin semana gato café libro música amigo idea quizás".split(),
    "de": "der die Film Reise Wochenende Katze Kaffee Buch Musik Freund Idee vielleicht".split(),
    "fr": "le la film voyage week-end chat café livre musique ami idée peut-être".split(),
    "ja": "私 映画 旅行 週末 猫 コーヒー 本 音楽 友達 本当に いい 考え".split(),
    "ko": "나 영화 여행 주말 고양이 커피 책 음악 친구 정말 좋은 생각".split(),
    "hi": "मैं फिल्म यात्रा सप्ताहांत बिल्ली कॉफी किताब संगीत दोस्त सच में अच्छा विचार".split(),
    "ar": "أنا فيلم رحلة عطلة قطة قهوة كتاب موسيقى صديق حقا فكرة ربما".split(),
    "ru": "я фильм поездка выходные кошка кофе книга музыка друг правда идея может".split(),
}
N_SETS = 12
GOALS = {"first page": 1.0, "filter": 2.0, "sort": 2.0}
RESULTS = ROOT / "bench" / "results" / "viewer_scale.json"
DOC = ROOT / "docs" / "viewer.md"


def _sentence(seed: int) -> str:
    """A SQL expression: 8-14 words of the row's language, pseudo-random by row and ``seed``."""
    return (
        f"array_to_string(list_transform(range(8 + (hash(i, {seed}) % 7)::BIGINT), "
        f"lambda k: w[1 + (hash(i, k, {seed}) % len(w))::BIGINT]), ' ')"
    )


def generate(root: Path, rows: int) -> Path:
    """Write ``root/run`` (results.json + samples.parquet) and ``root/dataset`` (the items); returns
    the run directory. Deterministic; reused when already there."""
    import duckdb

    run_dir, ds_dir = root / "run", root / "dataset"
    if (run_dir / "results.json").is_file():
        return run_dir
    for d in (run_dir, ds_dir):
        d.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    words = {k: v for k, v in WORDS.items()}
    con.execute(
        "CREATE TABLE words AS SELECT unnest(?::VARCHAR[]) AS lang, unnest(?::VARCHAR[][]) AS w",
        [list(words), list(words.values())],
    )
    sets = [f"set{k:02d}" for k in range(N_SETS)]
    con.execute(
        f"""CREATE TABLE base AS
        SELECT i, (?::VARCHAR[])[1 + i % {N_SETS}] AS dataset, l.lang AS language, l.w AS w,
               (1 + hash(i, 1) % 5)::INTEGER AS a1, (1 + hash(i, 2) % 5)::INTEGER AS a2, (1 + hash(i, 3) % 5)::INTEGER AS a3
        FROM range({rows}) r(i) JOIN words l ON l.lang = (?::VARCHAR[])[1 + (i // {N_SETS}) % 10]""",
        [sets, LANGS],
    )
    con.execute(
        f"""CREATE TABLE items AS SELECT dataset || '-' || lpad(i::VARCHAR, 8, '0') || '-' || language AS id,
            'item-' || (i // 120)::VARCHAR AS item_id, dataset, language, 'turn' AS level,
            NULL::VARCHAR AS dialogue_id, 'bot-' || (hash(i, 9) % 4)::VARCHAR AS system,
            NULL::VARCHAR AS scene, NULL::VARCHAR AS persona,
            [{{'role': 'user', 'text': {_sentence(11)}}}, {{'role': 'assistant', 'text': {_sentence(12)}}},
             {{'role': 'user', 'text': {_sentence(13)}}}] AS context,
            {_sentence(14)} AS response, NULL::VARCHAR AS response_role, NULL::VARCHAR AS reference,
            (a1 + a2 + a3) / 3.0 AS rating, 'relevance' AS dimension, i, a1, a2, a3
        FROM base"""
    )
    card = ["---", "configs:"]
    for s in sets:
        (ds_dir / s).mkdir(exist_ok=True)
        con.execute(
            f"COPY (SELECT * EXCLUDE (i, a1, a2, a3) FROM items WHERE dataset = '{s}' ORDER BY i) "
            f"TO '{ds_dir / s / 'test-00000-of-00001.parquet'}' (FORMAT parquet)"
        )
        card += [
            f"- config_name: {s}",
            "  data_files:",
            "  - split: test",
            f"    path: {s}/test-00000-of-00001.parquet",
        ]
    (ds_dir / "README.md").write_text("\n".join([*card, "---", "# viewer bench dataset", ""]), "utf-8")
    (ds_dir / "build_manifest.json").write_text(json.dumps({"fingerprint": "bench"}), "utf-8")
    dist = (
        "to_json(map(list_transform(list_distinct([a1, a2, a3]), lambda v: v::VARCHAR), "
        "list_transform(list_distinct([a1, a2, a3]), lambda v: len(list_filter([a1, a2, a3], lambda x: x = v)) / 3.0)))::VARCHAR"
    )
    con.execute(
        f"""COPY (SELECT 'bench' AS run_id, 'bench-turn' AS task, dataset, language, id, item_id,
              'hf:bench/judge' AS judge, substr(md5(id), 1, 16) AS prompt_hash,
              CASE WHEN hash(i, 5) % 100 = 0 THEN 'I think maybe' ELSE 'Yes' END AS raw_output,
              CASE WHEN hash(i, 5) % 100 = 0 THEN NULL
                   ELSE least(1.0, greatest(0.0, rating / 6.0 + ((hash(i, 6) % 1000) / 1000.0 - 0.5) * 0.6)) END AS score,
              CASE WHEN hash(i, 5) % 100 = 0 THEN 'no_logprobs' ELSE 'ok' END AS parse_status,
              '' AS parse_detail, rating AS human_rating, false AS cached, 180::BIGINT AS prompt_tokens,
              1::BIGINT AS completion_tokens, '{{"label_logprobs": {{"Yes": -0.2, "No": -1.7}}}}' AS extra, system,
              to_json({{'relevance': {{'a1': a1, 'a2': a2, 'a3': a3}}}})::VARCHAR AS human_labels,
              NULL::VARCHAR AS judge_labels, NULL::VARCHAR AS dialogue_id, 'relevance' AS human_dimension,
              {dist} AS human_distribution
            FROM items ORDER BY i) TO '{run_dir / "samples.parquet"}' (FORMAT parquet, ROW_GROUP_SIZE 100000)"""
    )
    per = con.execute(
        """SELECT language, dataset, corr(score, human_rating), count(score)
           FROM read_parquet(?) GROUP BY ALL""",
        [str(run_dir / "samples.parquet")],
    ).fetchall()
    results: dict = {}
    for lang, ds, r, n in per:
        entry = results.setdefault(
            lang, {"pearson": {"value": 0.0, "n": 0, "n_datasets": 0, "parse_failures": 0, "per_dataset": {}}}
        )
        entry["pearson"]["per_dataset"][ds] = {"value": r, "n": n}
    for entry in results.values():
        e = entry["pearson"]
        e["value"] = sum(d["value"] for d in e["per_dataset"].values()) / len(e["per_dataset"])
        e["n"] = sum(d["n"] for d in e["per_dataset"].values())
        e["n_datasets"] = len(e["per_dataset"])
    doc = {
        "schema_version": "1.1",
        "run": {"id": f"bench-{rows}", "tasks": ["bench-turn"], "n_items": rows},
        "harness": {"version": "bench"},
        "judge": {"spec": "hf:bench/judge"},
        "datasets": {
            "bench-turn": {
                "builder": "bench",
                "location": str(ds_dir),
                "revision": None,
                "configs": sets,
                "used_configs": sets,
            }
        },
        "tasks": {"bench-turn": {"level": "turn", "dimension": "relevance", "metrics": ["pearson"]}},
        "results": {"bench-turn": results},
        "parse_failures": {"bench-turn": rows // 100},
    }
    (run_dir / "results.json").write_text(json.dumps(doc, indent=1), "utf-8")
    return run_dir


# (name, what the page asks, goal key): timed in this order against one server
CASES = [
    ("facets (filter values)", "facets", {}, None),
    ("first page", "samples", {}, "first page"),
    ("filter: language", "samples", {"language": "ar"}, "filter"),
    (
        "filter: language + score range",
        "samples",
        {"language": "hi", "score_min": "0.2", "score_max": "0.5"},
        "filter",
    ),
    ("filter: parse failures", "samples", {"parse": "failed"}, "filter"),
    ("filter: chatbot + dataset", "samples", {"system": "bot-2", "dataset": "set07"}, "filter"),
    ("sort: disagreement", "samples", {"sort": "disagreement"}, "sort"),
    ("sort: disagreement within a language", "samples", {"sort": "disagreement", "language": "zh"}, "sort"),
    ("sort: human spread", "samples", {"sort": "spread"}, "sort"),
    ("sort: judge score, page 5,000", "samples", {"sort": "score", "page": "5000"}, "sort"),
    ("text search", "samples", {"q": "قهوة"}, "filter"),
    ("text search + sort", "samples", {"q": "咖啡 朋友", "sort": "disagreement"}, "filter"),
    ("one sample", "sample", {"task": "bench-turn", "dataset": "set03", "id": "set03-00000003-en"}, None),
    ("scatter (1,500 points per language)", "scatter", {"task": "bench-turn"}, None),
]


def _get(client, url: str) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of this process — the server's threads and DuckDB's included —,
    the JSON body) of one request."""
    t, cpu = time.perf_counter(), time.process_time()
    r = client.get(url)
    dt, dcpu = time.perf_counter() - t, time.process_time() - cpu
    if r.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {r.status_code} {r.text[:300]}")
    return dt, dcpu, r.json()


PASSES = [
    # (name, label, index cache kept from the previous pass, wait for the indexes before the requests)
    ("cold", "first open: indexes building in the background", False, False),
    ("reopened", "reopened: indexes read from the cache in the background", True, False),
    ("warm", "reopened, indexes loaded: the CPU of each request alone", True, True),
]


def measure(run_dir: Path, cache: Path, label: str, wait_index: bool) -> tuple[list[dict], dict]:
    """One viewer (as `harness view` starts it: indexes building in the background), every case once,
    each request the way the page makes it (a page whose texts are pending asks /snippets next)."""
    import httpx

    from harness.view.data import read_runs
    from harness.view.server import Viewer, ViewerServer

    t0 = time.perf_counter()
    viewer = Viewer(read_runs([run_dir]), cache_dir=cache)
    key = next(iter(viewer.runs))
    with ViewerServer(viewer) as srv, httpx.Client(base_url=srv.url, timeout=600) as client:
        started = time.perf_counter() - t0
        warm = viewer.warm()
        if wait_index:
            warm.join()
        rows = []
        for name, what, params, goal in CASES:
            if what == "facets":
                url = f"api/runs/{key}/facets"
            else:
                url = f"api/runs/{key}/{what}?" + "&".join(f"{k}={v}" for k, v in params.items())
            load1 = os.getloadavg()[0]
            dt, cpu, body = _get(client, url)
            row = {
                "case": name,
                "viewer": label,
                "seconds": dt,
                "cpu_s": cpu,
                "load1": load1,
                "goal_s": GOALS.get(goal) if goal else None,
                "total": body.get("total") if isinstance(body, dict) else None,
                "texts_s": None,
                "texts_cpu_s": None,
            }
            if isinstance(body, dict) and body.get("snippets_pending"):
                rids = ",".join(str(r["rid"]) for r in body["rows"])
                row["texts_s"], row["texts_cpu_s"], _ = _get(client, f"api/runs/{key}/snippets?rids={rids}")
            rows.append(row)
        warm.join()
        store = viewer.store(key)
        info = {
            "server_start_s": started,
            "index_build_s": store.index.seconds,
            "index_build_cpu_s": store.index.cpu_seconds,
            "index_from_cache": store.index.cached,
        }
        viewer.close()
    return rows, info


def markdown(r: dict) -> str:
    """The docs table: every case in every pass, wall and CPU seconds, with the goal and the ratio."""
    passes = [p for p in PASSES if p[0] in r]
    lines = [
        f"{r['rows']:,} samples, {r['machine']['cpus']}-core machine, {r['date'][:10]}, load average "
        f"{r['machine']['load_before'][0]:.1f} (1 min) / {r['machine']['load_before'][1]:.1f} (5 min) before the run, "
        f"{r['machine']['load_after'][0]:.1f} after. Each cell: seconds of the request (HTTP + JSON), "
        "then the CPU seconds of the viewer process during it (in the first two columns the index "
        'builds running in the background are included), and seconds / goal. "+ texts": the request '
        "for the list's texts that follows a page served before the search index exists.",
        "",
        "| request | " + " | ".join(p[1] for p in passes) + " | goal |",
        "|---|" + "---:|" * len(passes) + "---:|",
    ]

    def cell(x: dict) -> str:
        goal = x["goal_s"]
        out = f"{x['seconds']:.2f} (CPU {x['cpu_s']:.2f})" + (f" [{x['seconds'] / goal:.2f}]" if goal else "")
        if x.get("texts_s") is not None:
            out += f" + texts {x['texts_s']:.2f} (CPU {x['texts_cpu_s']:.2f})"
        return out

    for i, c in enumerate(r[passes[0][0]]["cases"]):
        goal = c["goal_s"]
        cells = " | ".join(cell(r[p[0]]["cases"][i]) for p in passes)
        lines.append(f"| {c['case']} | {cells} | {f'< {goal:g} s' if goal else ''} |")
    b, bc = r["cold"].get("index_build_s") or {}, r["cold"].get("index_build_cpu_s") or {}
    rb = r["reopened"].get("index_build_s") or {}
    lines += [
        "",
        f"Index builds on first open (in the background): filter/sort index {b.get('idx', 0):.1f} s "
        f"(CPU {bc.get('idx', 0):.1f} s), search index {b.get('search', 0):.1f} s (CPU {bc.get('search', 0):.1f} s); "
        f"reopened, read from the cache in {rb.get('idx', 0):.2f} s and {rb.get('search', 0):.2f} s; the search "
        f"texts loaded into memory (after the builds) in {rb.get('text', 0):.1f} s. "
        + ("All goals met." if not r["missed"] else "Missed: " + "; ".join(r["missed"]) + "."),
    ]
    over = [
        f"{x['case']} ({name})"
        for name in ("reopened", "warm")
        if name in r
        for x in r[name]["cases"]
        if x["goal_s"] and x["cpu_s"] + (x.get("texts_cpu_s") or 0) >= x["goal_s"]
    ]
    lines += [
        "",
        "In CPU seconds of the viewer (what stays comparable on a shared machine), every request of the "
        "two reopened columns is "
        + ("under its goal." if not over else "under its goal except " + "; ".join(over) + "."),
    ]
    return "\n".join(lines)


def write_docs(r: dict) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from docs_tables import replace_between_markers

    replace_between_markers(DOC, "viewer_scale", markdown(r))
    print(f"wrote the table into {DOC}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="samples in the synthetic run")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "out" / "viewer_scale", help="where the data go"
    )
    ap.add_argument("--json", type=Path, default=RESULTS)
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/viewer.md")
    ap.add_argument("--docs-only", action="store_true", help="only rewrite docs/viewer.md from the JSON")
    args = ap.parse_args()
    if args.docs_only:
        write_docs(json.loads(args.json.read_text(encoding="utf-8")))
        return 0

    t = time.perf_counter()
    run_dir = generate(args.out / str(args.rows), args.rows)
    gen_s = time.perf_counter() - t
    print(f"data: {run_dir} ({args.rows:,} samples; ready in {gen_s:.1f} s)")
    load_before = os.getloadavg()
    passes: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="viewer-index-") as tmp:
        for name, label, _, wait in PASSES:
            cases, info = measure(run_dir, Path(tmp), label, wait_index=wait)
            passes[name] = {"cases": cases, **info, "load_after": list(os.getloadavg())}
    width = max(len(c["case"]) for c in passes["cold"]["cases"])
    print(f"\nload average before: {load_before}; seconds (CPU seconds) per request")
    print(f"{'case':<{width}}  " + "  ".join(f"{n:>20}" for n in passes) + "   goal")
    missed = []
    for i, c in enumerate(passes["cold"]["cases"]):
        cells = []
        for name, p in passes.items():
            x = p["cases"][i]
            cells.append(f"{x['seconds']:8.3f} ({x['cpu_s']:6.3f} cpu)")
            if x["goal_s"] and x["seconds"] >= x["goal_s"]:
                missed.append(f"{x['case']} ({name}): {x['seconds']:.2f} s ≥ {x['goal_s']} s")
        print(f"{c['case']:<{width}}  " + "  ".join(cells) + f"  {c['goal_s'] or ''}")
    for name, p in passes.items():
        print(
            f"{name}: index build {p['index_build_s']} (CPU {p['index_build_cpu_s']}), from cache {p['index_from_cache']}"
        )
    doc = {
        "bench": "viewer_scale",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": args.rows,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            # 1-, 5-, 15-minute load averages: on a shared machine, timings mean little above ~2 per core
            "load_before": list(load_before),
            "load_after": list(os.getloadavg()),
        },
        "goals_s": GOALS,
        "generate_s": gen_s,
        **passes,
        "missed": missed,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    if args.write_docs:
        write_docs(doc)
    if missed:
        print("goals missed:\n  " + "\n  ".join(missed))
        return 1
    print("all goals met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
