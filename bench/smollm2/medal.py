"""The MEDAL pipeline with SmolLM2-135M-Instruct as user, user judge, chatbot and labeller.

    python bench/smollm2/medal.py                  # build with dataset_builders/medal_pipeline/configs/smollm2.yaml
    python bench/smollm2/medal.py --docs-only      # re-render docs/smollm2.md from bench/results/smollm2_medal.json

Runs ``harness datasets build medal --config <config> --registry bench/out/medal-smollm2-registry``
(the work folder, request cache and checkpoint are under ``bench/out/medal-smollm2``, so a killed run
resumes), then records the pipeline's own summary — generation counts and parse failures of the user
judge, Table 2 statistics, the labeller's parse failures and label rates, the malformed-dialogue
check (language mixing, role confusion) — in ``bench/results/smollm2_medal.json`` and renders it
into docs/smollm2.md (``bench/docs_tables.py``), with one dialogue per language as an example.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CONFIG = ROOT / "dataset_builders" / "medal_pipeline" / "configs" / "smollm2.yaml"
WORK = ROOT / "bench" / "out" / "medal-smollm2"
RESULTS = ROOT / "bench" / "results" / "smollm2_medal.json"
DOC = ROOT / "docs" / "smollm2.md"


def run(config: Path, registry: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "harness.cli", "datasets", "build", "medal", "--config", str(config)]
    subprocess.run([*cmd, "--registry", str(registry), "-q"], check=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    summary = json.loads((WORK / "summary.json").read_text("utf-8"))
    examples: dict[str, list[dict[str, str]]] = {}
    version = sorted((registry / "medal-smollm2").iterdir())[-1]
    for line in (
        (version / "dialogues.jsonl").read_text("utf-8").splitlines()
        if (version / "dialogues.jsonl").is_file()
        else []
    ):
        rec = json.loads(line)
        examples.setdefault(
            rec["language"], [{"role": t["role"], "text": t["text"][:160]} for t in rec["turns"]]
        )
    return {
        "config": str(config.relative_to(ROOT)),
        "wall_seconds": round(wall, 1),
        "summary": {
            k: summary.get(k)
            for k in ("seeds", "generation", "labels", "malformed", "rows", "timing_seconds")
        },
        "statistics": summary.get("statistics"),
        "examples": examples,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "date": time.strftime("%Y-%m-%d"),
    }


def _f(x: Any, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def markdown(r: dict[str, Any]) -> str:
    s = r["summary"]
    g, lab, mal = s["generation"], s["labels"], s["malformed"]
    lines = [
        f"`harness datasets build medal --config {r['config']}` ({r['date']}, {r['machine']}): "
        f"{s['seeds']} seed contexts, {g.get('dialogues')} dialogues, {r['wall_seconds'] / 60:.1f} min end to end.",
        "",
        "| what | value |",
        "|---|---|",
        f"| dialogues with turns / ended by | {g.get('dialogues_with_turns')} / "
        + ", ".join(f"{k} {v}" for k, v in (g.get("end_reasons") or {}).items())
        + " |",
        f"| first-turn pass rate (user judge) | {_f(g.get('first_turn_pass_rate'))} ({g.get('first_turn_rejected')} rejected) |",
        f"| user-judge parse failures | {g.get('user_judge_parse_failures')} |",
        f"| labeller (MEDAL JSON) parse failures | {lab.get('parse_failures')} of {lab.get('n')} "
        f"({', '.join(f'{k} {v}' for k, v in (lab.get('statuses') or {}).items())}) |",
        f"| overall rating (parsed), mean | {_f(lab.get('overall_mean'))} |",
        "| issues flagged (positive rate over parsed labels) | "
        + ", ".join(f"{k} {_f(v)}" for k, v in (lab.get("positive_rate") or {}).items() if v is not None)
        + " |",
        f"| malformed dialogues | {mal.get('malformed')} of {mal.get('n')} ("
        + ", ".join(f"{k} {v}" for k, v in (mal.get("reasons") or {}).items() if v)
        + ") |",
        f"| rows per config | {', '.join(f'{k} {v}' for k, v in (s.get('rows') or {}).items())} |",
        "",
    ]
    st = r.get("statistics")
    if st:
        lines += [
            "Table 2 statistics (`statistics` of the run summary):",
            "",
            "```",
            json.dumps(st, ensure_ascii=False)[:1200],
            "```",
            "",
        ]
    for lang, turns in r.get("examples", {}).items():
        lines.append(f"Example ({lang}): " + " / ".join(f"**{t['role']}**: {t['text']}" for t in turns[:4]))
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--registry", type=Path, default=ROOT / "bench" / "out" / "medal-smollm2-registry")
    ap.add_argument("--docs-only", action="store_true")
    args = ap.parse_args()
    if not args.docs_only:
        r = run(args.config, args.registry)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    from bench.docs_tables import write_blocks

    write_blocks("bench.smollm2.medal", json.loads(RESULTS.read_text("utf-8")))


if __name__ == "__main__":
    main()
