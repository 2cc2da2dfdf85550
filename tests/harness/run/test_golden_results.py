"""The meta-evaluation numbers of ``harness run`` stay the same as before runs were streamed: every
statistic of ``results.json`` (correlations, bootstrap CIs, per-dataset / per-language tables, soft
labels, ceilings, alt-test, levels, panel, MEDAL issue metrics) and every judged sample of a set of
runs on the shared data (xDial-Eval, UPHELD) and on synthetic MEDAL data equal the golden files
``tests/fixtures/golden/run_results.json`` and ``tests/fixtures/golden/samples/<run>.csv``, written
by the code before the change (``DIALEVAL_WRITE_GOLDEN=1 pytest tests/harness/run/test_golden_results.py``
rewrites them).

What is compared how (the suite must pass on any x86-64 CPU, AVX2 or AVX-512):

* ids, text, parse statuses, counts, keys and the order of the samples: exactly;
* scores (:data:`SCORE_TOL`): the replay judges' P(Yes) is a float64 made from a SHA-256 hash, but
  the judge turns its log-probs back into a probability with SciPy's ``softmax``, i.e. NumPy's
  ``exp``, whose AVX-512 and AVX2 kernels differ in the last bits: measured on the xDial-Eval run,
  68 of 3,196 scores differ between the two, by at most 2 ulps (2.2e-16). 1e-12 (relative or
  absolute) leaves a wide margin and still catches any real change of a score;
* human ratings: read from the data and averaged: the same on every CPU, compared the same way;
* statistics (:data:`STAT_TOL`): computed from those inputs by NumPy / SciPy / scikit-learn
  (reductions, BLAS, bootstrap resampling of the same indices); measured: at most 1.1e-15 apart
  between the two kernel sets. 1e-9 absorbs that with room for other summation orders.
"""

from __future__ import annotations

import csv
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
from tests.fixtures.tolerances import FLOAT64_PATHS, float_diffs

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
GOLDEN = GOLDEN_DIR / "run_results.json"
WRITE = os.environ.get("DIALEVAL_WRITE_GOLDEN") == "1"
STAT_TOL = FLOAT64_PATHS
SCORE_TOL = 1e-12
#: a sample's identity and outcome, compared exactly; then its two floats, compared with SCORE_TOL
SAMPLE_KEYS = ("task", "dataset", "language", "id", "parse_status")
SAMPLE_FLOATS = ("score", "human_rating")

#: the sections of results.json that hold statistics (the rest is provenance, timings, paths)
SECTIONS = ("results", "parse_failures", "label_parse_failures", "human_labels", "alt_test", "panel")


def _write(path: Path, rules: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rules), encoding="utf-8")
    return f"replay:{path}"


def _float(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _samples(samples: pd.DataFrame) -> list[dict[str, Any]]:
    """Every sample's identity, parse status, score and human rating, in file order (the order is
    part of what must not change)."""
    rows = []
    for r in samples[[*SAMPLE_KEYS, *SAMPLE_FLOATS]].to_dict("records"):
        rows.append({**{k: str(r[k]) for k in SAMPLE_KEYS}, **{k: _float(r[k]) for k in SAMPLE_FLOATS}})
    return rows


def _write_samples(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*SAMPLE_KEYS, *SAMPLE_FLOATS], lineterminator="\n")
        w.writeheader()
        w.writerows(
            {k: "" if v is None else repr(v) if isinstance(v, float) else v for k, v in r.items()}
            for r in rows
        )


def _read_samples(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8", newline="") as f:
        return [
            {**{k: r[k] for k in SAMPLE_KEYS}, **{k: float(r[k]) if r[k] else None for k in SAMPLE_FLOATS}}
            for r in csv.DictReader(f)
        ]


def _compare_samples(
    name: str, want: list[dict[str, Any]], got: list[dict[str, Any]], diffs: list[str]
) -> None:
    if len(want) != len(got):
        diffs.append(f"{name}/samples: {len(got)} rows, the golden file has {len(want)}")
    for i, (w, g) in enumerate(zip(want, got, strict=False)):
        where = f"{name}/samples[{i}] ({'|'.join(w[k] for k in SAMPLE_KEYS)})"
        if any(w[k] != g[k] for k in SAMPLE_KEYS):
            diffs.append(f"{where}: is now {'|'.join(g[k] for k in SAMPLE_KEYS)}")
            continue
        for k in SAMPLE_FLOATS:
            a, b = w[k], g[k]
            if (a is None) != (b is None) or (
                a is not None
                and b is not None
                and not math.isclose(a, b, rel_tol=SCORE_TOL, abs_tol=SCORE_TOL)
            ):
                diffs.append(f"{where}/{k}: {b!r} != golden {a!r}")


def _capture(out_dir: Path, tmp: Path) -> dict[str, Any]:
    res = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    text = json.dumps({k: res[k] for k in SECTIONS if k in res}, ensure_ascii=False)
    section = json.loads(text.replace(str(tmp), "<tmp>"))
    section["n_items"] = res["run"]["n_items"]
    section["used_configs"] = {t: d["used_configs"] for t, d in res["datasets"].items()}
    section["samples"] = _samples(pd.read_parquet(out_dir / "samples.parquet"))
    return section


def _check(name: str, got: dict[str, Any]) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.is_file() else {}
    samples_file = GOLDEN_DIR / "samples" / f"{name}.csv"
    samples = got.pop("samples")
    if WRITE:
        golden[name] = {**got, "samples": {"rows": len(samples), "file": f"samples/{name}.csv"}}
        samples_file.parent.mkdir(parents=True, exist_ok=True)
        _write_samples(samples_file, samples)
        GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
        return
    assert name in golden, f"no golden for {name!r}: run with DIALEVAL_WRITE_GOLDEN=1 on the reference code"
    want = dict(golden[name])
    want_samples = want.pop("samples")
    diffs: list[str] = []
    diffs += float_diffs(want, json.loads(json.dumps(got)), tol=STAT_TOL, where=name)
    if want_samples["rows"] != len(samples):
        diffs.append(f"{name}/samples: {len(samples)} rows != golden {want_samples['rows']}")
    _compare_samples(name, _read_samples(GOLDEN_DIR / want_samples["file"]), samples, diffs)
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
