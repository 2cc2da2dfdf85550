"""The meta-evaluation numbers of ``harness run`` stay the same as before runs were streamed:
every statistic of ``results.json`` (correlations, bootstrap CIs, per-dataset / per-language
tables, soft labels, ceilings, alt-test, levels, panel, MEDAL issue metrics) and every judged sample
of a set of runs on the shared data (xDial-Eval, UPHELD) and on synthetic MEDAL data equal the golden
file ``tests/fixtures/golden/run_results.json``, written by the code before the change
(``DIALEVAL_WRITE_GOLDEN=1 pytest tests/harness/run/test_golden_results.py`` rewrites it).

Replay judges give float64 scores from SHA-256 hashes, so the inputs of the statistics are bit-identical
on every CPU; the comparison allows 1e-9 for summation order inside NumPy/SciPy.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OVERALL_KEY
from harness.run.runner import RunConfig, run
from tests.fixtures.medal_source import medal_records, write_medal_source

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "run_results.json"
WRITE = os.environ.get("DIALEVAL_WRITE_GOLDEN") == "1"
TOL = 1e-9

#: the sections of results.json that hold statistics (the rest is provenance, timings, paths)
SECTIONS = ("results", "parse_failures", "label_parse_failures", "human_labels", "alt_test", "panel")


def _write(path: Path, rules: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rules), encoding="utf-8")
    return f"replay:{path}"


def _samples_digest(samples: pd.DataFrame) -> dict[str, Any]:
    """Row count and a digest of every sample's identity, score, parse status and human rating, in
    file order (the order is part of what must not change)."""
    h = hashlib.sha256()
    for r in samples[
        ["task", "dataset", "language", "id", "score", "parse_status", "human_rating"]
    ].itertuples(index=False):
        score = None if r.score is None or (isinstance(r.score, float) and math.isnan(r.score)) else r.score
        h.update(
            f"{r.task}|{r.dataset}|{r.language}|{r.id}|{score!r}|{r.parse_status}|{r.human_rating!r}\n".encode()
        )
    return {"rows": len(samples), "sha256": h.hexdigest()}


def _capture(out_dir: Path, tmp: Path) -> dict[str, Any]:
    res = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    text = json.dumps({k: res[k] for k in SECTIONS if k in res}, ensure_ascii=False)
    section = json.loads(text.replace(str(tmp), "<tmp>"))
    section["n_items"] = res["run"]["n_items"]
    section["used_configs"] = {t: d["used_configs"] for t, d in res["datasets"].items()}
    section["samples"] = _samples_digest(pd.read_parquet(out_dir / "samples.parquet"))
    return section


def _close(a: Any, b: Any, where: str, diffs: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            diffs.append(f"{where}: keys differ: -{sorted(set(a) - set(b))} +{sorted(set(b) - set(a))}")
        for k in set(a) & set(b):
            _close(a[k], b[k], f"{where}/{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _close(x, y, f"{where}[{i}]", diffs)
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or isinstance(a, bool):
            diffs.append(f"{where}: {a!r} != {b!r}")
        elif not math.isclose(a, b, rel_tol=TOL, abs_tol=TOL):
            diffs.append(f"{where}: {a!r} != {b!r}")
    elif a != b:
        diffs.append(f"{where}: {a!r} != {b!r}")


def _check(name: str, got: dict[str, Any]) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.is_file() else {}
    if WRITE:
        golden[name] = got
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
        return
    assert name in golden, f"no golden for {name!r}: run with DIALEVAL_WRITE_GOLDEN=1 on the reference code"
    diffs: list[str] = []
    _close(golden[name], json.loads(json.dumps(got)), name, diffs)
    assert not diffs, f"{len(diffs)} difference(s) from the golden results, e.g.:\n" + "\n".join(diffs[:15])


XDIAL_RULES = [
    # a scripted parse failure in every language: responses mentioning a bot, robot, or their translations
    {
        "match": "Dialogue Response:\\n[^\\n]*(?i:robot|bot\\b|机器人|robot|Roboter|ロボット|로봇|रोबोट|روبوت|робот)",
        "response": {"text": "Maybe"},
    },
    {"default": {"hashed_p_yes": True}},
]


@pytest.mark.shared_data
def test_xdial_eval_run_matches_golden(xdial_source, tmp_path):
    judge = _write(tmp_path / "judge.jsonl", XDIAL_RULES)
    out = tmp_path / "run"
    run(
        RunConfig(
            judge=judge,
            tasks=["xdial-eval-turn", "xdial-eval-dialogue"],
            source=str(xdial_source),
            limit=40,
            n_bootstrap=200,
            output_dir=out,
            show_progress=False,
            use_cache=False,
        )
    )
    _check("xdial-eval", _capture(out, tmp_path))


@pytest.fixture(scope="module")
def upheld_source(shared_data) -> Path:
    p = shared_data / "upheld"
    if not p.is_dir():
        pytest.skip(f"UPHELD data not found at {p}")
    return p


UPHELD_RULES = [
    {"match": "Prediction: [A-F]", "response": {"text": "No"}},
    {"match": "Prediction: [G-L]", "response": {"text": "unsure"}},
    {"default": {"hashed_p_yes": True}},
]
CPD_RULES = [
    {
        "match": "(?i)overall dialogue",
        "select": "seed",
        "responses": [
            {"text": "Overall Dialogue Turn Score - 3\nDialogue Interaction Score - 4\nFinal Score - 3.5"},
            {"text": "Overall Dialogue Turn Score - 4\nDialogue Interaction Score - 2\nFinal Score - 4.5"},
            {"text": "Overall Dialogue Turn Score - 2\nDialogue Interaction Score - 2\nFinal: unclear"},
        ],
    },
    {
        "match": "### Response:\n[A-J]",
        "select": "seed",
        "responses": [
            {"text": "overall - 2\n- Humanness: 2"},
            {"text": "overall - 3\n- Humanness: 3"},
            {"text": "no idea"},
        ],
    },
    {
        "match": "### Response:\n",
        "select": "seed",
        "responses": [
            {"text": "overall - 5\n- Humanness: 5"},
            {"text": "overall - 4\n- Humanness: 1"},
            {"text": "overall - 1\n- Humanness: 4"},
        ],
    },
]


@pytest.mark.shared_data
def test_upheld_runs_match_golden(upheld_source, tmp_path):
    """Annotator-level statistics (soft labels, ceilings, high agreement, alt-test), the
    dialogue/system levels of CPDScore and a panel judge's section, on the real UPHELD release."""
    yes = _write(tmp_path / "yes.jsonl", UPHELD_RULES)
    cpd = _write(tmp_path / "cpd.jsonl", CPD_RULES)
    no = _write(
        tmp_path / "no.jsonl",
        [{"match": "Prediction: [A-M]", "response": {"text": "No"}}, {"default": {"text": "Yes"}}],
    )
    third = _write(tmp_path / "third.jsonl", [{"default": {"hashed_p_yes": True, "text": "Yes"}}])
    runs = {
        "upheld-content": dict(judge=yes, tasks=["upheld-content"], limit=80),
        "cpdscore": dict(judge=cpd, tasks=["cpdscore-d-noref", "cpdscore-dial-turns"], limit=60),
        "upheld-panel": dict(
            judge=f"panel:{yes}+{no}+{third},vote=majority", tasks=["upheld-content"], limit=60
        ),
    }
    for name, kw in runs.items():
        out = tmp_path / name
        run(
            RunConfig(
                **kw,
                source=str(upheld_source),
                n_bootstrap=50,
                output_dir=out,
                show_progress=False,
                use_cache=False,
            )
        )
        _check(name, _capture(out, tmp_path))


def test_medal_run_matches_golden(tmp_path):
    """MEDAL issue metrics (per language and pooled), on the synthetic MEDAL fixture."""
    src = write_medal_source(tmp_path / "medal-src")
    records = medal_records()
    convs = list(dict.fromkeys("\n".join(f"{t['role']}: {t['text']}" for t in r["turns"]) for r in records))
    rules = []
    for i, c in enumerate(convs):
        obj = {
            d: {"label": int((i * 7 + k) % 3 == 0), "comment": ""}
            for k, d in enumerate((*MEDAL_ISSUES, "other"))
        }
        obj[MEDAL_OVERALL_KEY] = {"label": 1 + i % 5, "comment": ""}
        text = json.dumps(obj) if i % 11 else '{"unsafe": {"label": 0,}'
        rules.append({"match": re.escape(c) + r"\Z", "response": {"text": text}})
    judge = _write(tmp_path / "medal.jsonl", rules)
    out = tmp_path / "run"
    run(
        RunConfig(
            judge=judge,
            tasks=["medal"],
            source=str(src),
            n_bootstrap=100,
            output_dir=out,
            show_progress=False,
            use_cache=False,
        )
    )
    _check("medal", _capture(out, tmp_path))


def test_demo_run_matches_golden(tmp_path):
    """The embedded demo benchmark (no shared data needed): both levels, 10 languages."""
    judge = _write(tmp_path / "judge.jsonl", XDIAL_RULES)
    out = tmp_path / "run"
    run(
        RunConfig(
            judge=judge, tasks=["demo"], n_bootstrap=300, output_dir=out, show_progress=False, use_cache=False
        )
    )
    _check("demo", _capture(out, tmp_path))
