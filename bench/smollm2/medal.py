"""The MEDAL pipeline with SmolLM2-135M-Instruct as user, user judge, chatbot and labeller.

    python bench/smollm2/medal.py                  # build with dataset_builders/medal_pipeline/configs/smollm2.yaml
    python bench/smollm2/medal.py --config dataset_builders/medal_pipeline/configs/smollm2-t07.yaml
    python bench/smollm2/medal.py --config dataset_builders/medal_pipeline/configs/smollm2-logprob.yaml
    python bench/smollm2/medal.py --config … --no-build   # collect a finished build from its work folder
    python bench/smollm2/medal.py --docs-only      # re-render docs/smollm2.md from bench/results/smollm2_medal.json

Runs ``harness datasets build medal --config <config> --registry bench/out/medal-smollm2-registry``
(the config's work folder holds the request cache and checkpoint, so a killed run resumes), then
records what happened under the config's name in ``bench/results/smollm2_medal.json`` (one entry per
config) and renders every entry into docs/smollm2.md (``bench/docs_tables.py``):

* the pipeline's own summary — generation counts, end reasons and user-judge parse failures, the
  labeller's MEDAL JSON parse failures and label rates, the malformed-dialogue check, curation;
* how the user judge decided (its written reply, or label log-probs: then the P(Yes) of every
  attempt it judged) and the dialogues with turns / kept per language;
* Table 2 statistics per language twice: of the dialogues the pipeline keeps (its malformed filter
  applied, as published) and of every generated dialogue (what the filter removed);
* language mixing per language and role: the language py3langid identifies for every utterance (the
  pipeline's own rule check, :func:`rule_language_check`), so "the chatbot answered the German user
  in English" is counted, not guessed;
* one dialogue per language as an example.
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
CONFIG = ROOT / "dataset_builders" / "medal_pipeline" / "configs" / "smollm2.yaml"
# DIALEVAL_BENCH_RESULTS: another folder for the JSON (a trial or GPU run; the docs are then left alone)
BENCH_RESULTS = os.environ.get("DIALEVAL_BENCH_RESULTS")
RESULTS = Path(BENCH_RESULTS or ROOT / "bench" / "results") / "smollm2_medal.json"
DOC = ROOT / "docs" / "smollm2.md"
TABLE2 = (
    "dialogues",
    "avg_turns",
    "avg_utterance_length",
    "avg_user_utterance_length",
    "avg_chatbot_utterance_length",
    "unit",
    "mtld",
    "mtld_tokens",
)


def _dialogues(work: Path) -> list[Any]:
    from dataset_builders.medal_pipeline.generate import STATE_FILE
    from dataset_builders.medal_pipeline.types import Dialogue

    state = json.loads((work / STATE_FILE).read_text("utf-8"))
    return [Dialogue.from_dict(d) for d in state["dialogues"]]


def language_mixing(dialogues: list[Any], min_chars: int, min_prob: float) -> dict[str, Any]:
    """Per target language and role: utterances, identified languages, mismatches, too short."""
    from dataset_builders.medal_pipeline.malformed import rule_language_check

    out: dict[str, Any] = {}
    for d in dialogues:
        rows, _ = rule_language_check(d, min_chars=min_chars, min_prob=min_prob)
        per = out.setdefault(d.language, {"dialogues": 0, "dialogues_with_mismatch": 0, "roles": {}})
        per["dialogues"] += 1
        per["dialogues_with_mismatch"] += any(r["mismatch"] for r in rows)
        for r in rows:
            role = per["roles"].setdefault(
                r["role"], {"n": 0, "too_short": 0, "mismatch": 0, "identified": {}}
            )
            role["n"] += 1
            role["too_short"] += r["lang"] is None
            role["mismatch"] += bool(r["mismatch"])
            if r["lang"] is not None:
                role["identified"][r["lang"]] = role["identified"].get(r["lang"], 0) + 1
    for per in out.values():
        for role in per["roles"].values():
            role["identified"] = dict(Counter(role["identified"]).most_common())
    return out


def first_turn_languages(work: Path, min_chars: int, min_prob: float) -> dict[str, Any]:
    """The language identified for every attempt at a first user turn (accepted or not), per target
    language: what the user model wrote before its judge saw it."""
    from dataset_builders.medal_pipeline.malformed import _same_language, clean_for_langid, identify

    seeds = {
        json.loads(line)["id"]: json.loads(line)["language"]
        for line in (work / "seeds.jsonl").read_text("utf-8").splitlines()
    }
    out: dict[str, Any] = {}
    state = json.loads((work / "state.json").read_text("utf-8"))
    for key, slot in (state.get("first_turns") or {}).items():
        lang = seeds.get(key.split("|")[0])
        per = out.setdefault(lang, {"n": 0, "too_short": 0, "mismatch": 0, "identified": Counter()})
        for a in slot.get("attempts") or []:
            text = clean_for_langid(a.get("text") or "")
            per["n"] += 1
            if len(text) < min_chars:
                per["too_short"] += 1
                continue
            got, prob = identify(text)
            per["identified"][got] += 1
            per["mismatch"] += prob >= min_prob and not _same_language(got, lang)
    return {k: {**v, "identified": dict(v["identified"].most_common())} for k, v in out.items()}


def table2(dialogues: list[Any]) -> dict[str, Any]:
    from dataset_builders.medal_pipeline.stats import language_statistics

    if not dialogues:
        return {}
    return {
        lang: {k: v for k, v in row.items() if k in TABLE2}
        for lang, row in language_statistics(dialogues).items()
        if lang != "all"
    }


def judge_p_yes(work: Path) -> dict[str, Any] | None:
    """P(Yes) = P(Yes) / (P(Yes) + P(No)) of every user-judge verdict taken by label log-probs (first
    and later user turns, accepted or not); None when the judge decided by its written reply."""
    from harness.parsing.logprobs import p_yes

    state = json.loads((work / "state.json").read_text("utf-8"))
    attempts = [a for slot in (state.get("first_turns") or {}).values() for a in slot.get("attempts") or []]
    attempts += [a for d in state["dialogues"] for t in d["turns"][1:] for a in t.get("attempts") or []]
    lps = [a["judge_logprobs"] for a in attempts if a.get("judge_logprobs") is not None]
    if not lps:
        return None
    ps = [v for v in (p_yes(lp).value for lp in lps) if v is not None]
    return {
        "n": len(lps),
        "no_logprob": len(lps) - len(ps),
        "mean": round(sum(ps) / len(ps), 4) if ps else None,
        "min": round(min(ps), 4) if ps else None,
        "max": round(max(ps), 4) if ps else None,
        "accepted": sum(p > 0.5 for p in ps),
    }


def _partial_summary(work: Path) -> dict[str, Any]:
    """A build killed before its summary: the generation counts of its last checkpoint, nothing else
    (no labels, no malformed filter: no dialogue counts as kept)."""
    from dataset_builders.medal_pipeline.generate import STATE_FILE, generation_summary, load_state

    state = load_state(work / STATE_FILE)
    if state is None:
        raise SystemExit(f"{work}: no checkpoint ({STATE_FILE}) to report")
    seeds = sum(1 for line in (work / "seeds.jsonl").read_text("utf-8").splitlines() if line.strip())
    return {
        "partial": f"killed at checkpoint step {state.step} ({state.phase}): generation only",
        "seeds": seeds,
        "generation": generation_summary(state),
        "labels": {},
        "malformed": {},
    }


def run(config: Path, registry: Path, build: bool = True) -> dict[str, Any]:
    from dataset_builders.medal_pipeline.config import PipelineConfig

    cfg = PipelineConfig.load(config)
    work = cfg.work
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "harness.cli", "datasets", "build", "medal", "--config", str(config)]
    if build:
        subprocess.run([*cmd, "--registry", str(registry), "-q"], check=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    done = (work / "summary.json").is_file()
    if (
        not build
    ):  # the build's own wall time: seeds written -> summary (or, killed, the last checkpoint) written
        end = work / ("summary.json" if done else "state.json")
        wall = end.stat().st_mtime - (work / "seeds.jsonl").stat().st_mtime
    summary = json.loads((work / "summary.json").read_text("utf-8")) if done else _partial_summary(work)
    dialogues = _dialogues(work)
    generated = [d for d in dialogues if d.turns]
    malformed_ids = {
        json.loads(line)["id"]
        for line in (
            (work / "publish" / "malformed.jsonl").read_text("utf-8").splitlines()
            if (work / "publish" / "malformed.jsonl").is_file()
            else []
        )
    }
    kept = [d for d in generated if d.id not in malformed_ids] if done else []
    examples = {}
    for d in generated:
        examples.setdefault(d.language, [{"role": t.role, "text": t.text[:160]} for t in d.turns])
    rejected = [  # the first-turn attempts of dialogues that never started, and the judge's answers
        {"language": d.language, "status": d.status, "detail": (d.detail or "")[:160]}
        for d in dialogues
        if not d.turns
    ]
    attempts = [
        {
            "text": a.get("text", "")[:120],
            "accepted": a.get("accepted"),
            "judge": a.get("judge_raw", "")[:80],
            **({"judge_logprobs": a["judge_logprobs"]} if a.get("judge_logprobs") is not None else {}),
        }
        for slot in json.loads((work / "state.json").read_text("utf-8")).get("first_turns", {}).values()
        for a in (slot.get("attempts") or [])[:1]
    ][:3]
    cur = summary.get("curation") or {}
    return {
        "config": str(
            config.resolve().relative_to(ROOT) if config.resolve().is_relative_to(ROOT) else config
        ),
        "name": cfg.name,
        "first_turn_decoding": cfg.generation.first_turn.model_dump(mode="json"),
        "user_judge_decoding": cfg.generation.user_judge.model_dump(mode="json"),
        "languages": list(cfg.languages),
        "n_scenes": cfg.seeds.n_scenes,
        "wall_seconds": round(wall, 1),
        "summary": {
            k: summary.get(k)
            for k in ("partial", "seeds", "generation", "labels", "malformed", "rows", "timing_seconds")
        },
        "curation": {k: cur.get(k) for k in ("excluded", "shortfall", "relaxations")},
        "statistics": summary.get("statistics"),
        "per_language": {
            lang: {
                "dialogues": sum(d.language == lang for d in dialogues),
                "with_turns": sum(d.language == lang for d in generated),
                "kept": sum(d.language == lang for d in kept),
            }
            for lang in cfg.languages
        },
        "judge_p_yes": judge_p_yes(work),
        "table2_kept": table2(kept),
        "table2_generated": table2(generated),
        "language_mixing": language_mixing(
            generated, cfg.malformed.langid_min_chars, cfg.malformed.langid_min_prob
        ),
        "first_turn_languages": first_turn_languages(
            work, cfg.malformed.langid_min_chars, cfg.malformed.langid_min_prob
        ),
        "examples": examples,
        "not_started": rejected,
        "first_turn_examples": attempts,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        + (f", OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}" if os.environ.get("OMP_NUM_THREADS") else ""),
        "date": time.strftime("%Y-%m-%d"),
    }


def _f(x: Any, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def _t2_rows(title: str, t2: dict[str, Any]) -> list[str]:
    if not t2:
        return [f"| {title} | (no dialogues) | | | | | |"]
    return [
        f"| {title} | {lang} | {row['dialogues']} | {_f(row['avg_turns'], '.1f')} | "
        f"{_f(row['avg_user_utterance_length'], '.1f')} / {_f(row['avg_chatbot_utterance_length'], '.1f')} "
        f"{row['unit']} | {_f(row['mtld'], '.1f')} ({row['mtld_tokens']} tokens) |"
        for lang, row in t2.items()
    ]


def markdown(results: dict[str, Any]) -> str:
    """Every run of ``results["runs"]`` (one per config), in the order they were added."""
    return "\n\n".join(markdown_run(r) for r in (results.get("runs") or {}).values())


def _judge_rows(r: dict[str, Any]) -> list[str]:
    rows = []
    if pl := r.get("per_language"):
        rows.append(
            "| dialogues per language: all / with turns / kept after the malformed filter | "
            + ", ".join(f"{k} {v['dialogues']} / {v['with_turns']} / {v['kept']}" for k, v in pl.items())
            + " |"
        )
    if j := r.get("judge_p_yes"):
        rows.append(
            f"| user judge P(Yes) over its {j['n']} verdicts: mean (min–max) / accepted / no log-prob | "
            f"{_f(j['mean'], '.3f')} ({_f(j['min'], '.3f')}–{_f(j['max'], '.3f')}) / {j['accepted']} / "
            f"{j['no_logprob']} |"
        )
    return rows


def markdown_run(r: dict[str, Any]) -> str:
    s = r["summary"]
    g, lab, mal = s["generation"], s["labels"], s["malformed"]
    ft = r.get("first_turn_decoding") or {}
    decide = (r.get("user_judge_decoding") or {}).get("decide", "written")
    how = "label log-probs, P(Yes) > P(No)" if decide == "logprobs" else "its written reply"
    lines = [
        f"**`{r['name']}`** — `harness datasets build medal --config {r['config']}` ({r['date']}, {r['machine']}), "
        f"first user turn at temperature {ft.get('temperature')}, presence penalty {ft.get('presence_penalty')}, "
        f"{ft.get('attempts')} attempts, user judge deciding by {how}: "
        f"{len(r['languages'])} languages × {r['n_scenes']} scene(s) = {s['seeds']} seed contexts, "
        f"{g.get('dialogues')} dialogues, {r['wall_seconds'] / 60:.1f} min end to end"
        + (f" — **partial: {s['partial']}**." if s.get("partial") else "."),
        "",
        "| what | value |",
        "|---|---|",
        f"| dialogues with turns / ended by | {g.get('dialogues_with_turns')} / "
        + ", ".join(f"{k} {v}" for k, v in (g.get("statuses") or {}).items())
        + " |",
        f"| first-turn pass rate (user judge) | {_f(g.get('first_turn_pass_rate'))} "
        f"({g.get('first_turn_rejected')} rejected) |",
        f"| later user-turn pass rate (user judge) | {_f(g.get('user_turn_pass_rate'))} "
        f"({g.get('user_turn_rejected')} dialogues ended by a rejected user turn) |",
        f"| user-judge parse failures | {g.get('user_judge_parse_failures')} |",
        *_judge_rows(r),
        f"| labeller (MEDAL JSON) parse failures | {lab.get('parse_failures')} of {lab.get('n')} "
        f"({', '.join(f'{k} {v}' for k, v in (lab.get('statuses') or {}).items())}) |",
        f"| overall rating (parsed), mean | {_f(lab.get('overall_mean'))} |",
        "| issues flagged (positive rate over parsed labels) | "
        + (
            ", ".join(f"{k} {_f(v)}" for k, v in (lab.get("positive_rate") or {}).items() if v is not None)
            or "—"
        )
        + " |",
        f"| malformed dialogues (filtered out) | {mal.get('malformed')} of {mal.get('n')} ("
        + (", ".join(f"{k} {v}" for k, v in (mal.get("reasons") or {}).items() if v) or "none")
        + ") |",
        f"| curation: excluded / shortfall | {r['curation'].get('excluded')} / {r['curation'].get('shortfall')} |",
        f"| rows per config | {', '.join(f'{k} {v}' for k, v in (s.get('rows') or {}).items())} |",
        "",
        "**Language mixing** — the language py3langid identifies for every utterance (≥ 20 characters, "
        "p ≥ 0.9 counts as a mismatch), per target language and role:",
        "",
        "| language | dialogues (with a mismatch) | role | utterances | too short | mismatches | identified as |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for lang, per in r["language_mixing"].items():
        for role, x in per["roles"].items():
            ident = ", ".join(f"{k} {v}" for k, v in x["identified"].items()) or "—"
            lines.append(
                f"| {lang} | {per['dialogues']} ({per['dialogues_with_mismatch']}) | {role} | {x['n']} | "
                f"{x['too_short']} | {x['mismatch']} | {ident} |"
            )
    for lang, x in (r.get("first_turn_languages") or {}).items():
        ident = ", ".join(f"{k} {v}" for k, v in x["identified"].items()) or "—"
        lines.append(
            f"| {lang} | — | user, every first-turn attempt | {x['n']} | {x['too_short']} | {x['mismatch']} | {ident} |"
        )
    lines += [
        "",
        "**Table 2 statistics** (utterances per dialogue, mean user / chatbot utterance length, MTLD over all "
        "utterances of the language) of the dialogues the pipeline keeps after its malformed filter, and of "
        "every generated dialogue:",
        "",
        "| set | language | dialogues | utterances / dialogue | length user / chatbot | MTLD |",
        "|---|---|---:|---:|---|---|",
        *_t2_rows("kept", r.get("table2_kept") or {}),
        *_t2_rows("generated", r.get("table2_generated") or {}),
        "",
    ]
    if r.get("not_started"):
        lines += [
            f"{len(r['not_started'])} dialogue(s) never started ("
            + ", ".join(f"{k} {v}" for k, v in Counter(x["status"] for x in r["not_started"]).items())
            + "). First attempts of the first user turn and the user judge's reply:",
            "",
        ]
        for a in r.get("first_turn_examples") or []:
            text = a["text"].replace("\n", " ").replace("|", "¦")
            judge = a["judge"].replace("\n", " ").replace("|", "¦")
            if (lp := a.get("judge_logprobs")) is not None:
                from harness.parsing.logprobs import p_yes

                judge = f"P(Yes) {_f(p_yes(lp).value, '.3f')}, wrote “{judge}”"
            else:
                judge = f"“{judge}”"
            lines.append(f"* “{text}” → judge: {judge} (accepted: {a['accepted']})")
        lines.append("")
    for lang, turns in r.get("examples", {}).items():
        text = " / ".join(
            f"**{t['role']}**: {t['text']}".replace("\n", " ").replace("|", "¦") for t in turns[:4]
        )
        lines.append(f"Example ({lang}): {text}")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--registry", type=Path, default=ROOT / "bench" / "out" / "medal-smollm2-registry")
    ap.add_argument("--docs-only", action="store_true")
    ap.add_argument("--no-build", action="store_true", help="collect the finished run in the work folder")
    args = ap.parse_args()
    if not args.docs_only:
        r = run(args.config, args.registry, build=not args.no_build)
        results = json.loads(RESULTS.read_text("utf-8")) if RESULTS.is_file() else {}
        results.setdefault("runs", {})[r["name"]] = r
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if BENCH_RESULTS:
        print(f"wrote {RESULTS} (docs/smollm2.md left as it is: it shows the committed JSON)")
        return
    from bench.docs_tables import write_blocks

    write_blocks("bench.smollm2.medal", json.loads(RESULTS.read_text("utf-8")))


if __name__ == "__main__":
    main()
