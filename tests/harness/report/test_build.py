"""``harness report``: tables, figures, Markdown/HTML and the CLI, on run directories built here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from dataset_builders.medal_labels import ISSUE_ABBREVIATIONS, MEDAL_ISSUES
from harness.cli.report import report_command
from harness.report.build import (
    build_report,
    correlation_table,
    fmt_entry,
    issue_dimension_table,
    issue_metrics_table,
    issue_rate_table,
    label_frame,
    leaderboard_table,
    load_run,
    overall_score_table,
)

LANGS = ("en", "de", "zh")
SYSTEMS = ("bot-a", "bot-b")
DIMS = list(MEDAL_ISSUES)
NEW_COLUMNS = ("system", "human_labels", "judge_labels")


def _entry(value, ci=None, n=20, **kw):
    return {"value": value, "ci": ci, "n": n, "parse_failures": 0, **kw}


def _write(out: Path, results: dict, samples: pd.DataFrame) -> Path:
    """A run directory as an older harness wrote it: a results.json of schema 1.x (hand-written here;
    the report reads it through the migration) and its samples.parquet (the columns given)."""
    out.mkdir(parents=True, exist_ok=True)
    samples.to_parquet(out / "samples.parquet", index=False)
    (out / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return out


def _medal_samples(run_id: str, judge: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hum = np.random.default_rng(99)  # the human labels are the same in every run
    rows = []
    for lang in LANGS:
        for k in range(8):
            system = SYSTEMS[k % 2]
            item = f"{lang}-{k}"
            human = {
                d: {"a1": int(hum.random() < 0.1), "a2": None if lang == "de" else int(hum.random() < 0.1)}
                for d in DIMS
            }
            failed = k == 7 and lang != "zh"  # two parse failures
            labels = {d: int(rng.random() < 0.2) for d in DIMS} | {"other": 1}
            if k == 3:
                labels["unsafe"] = None  # a null label
            rows.append(
                {
                    "run_id": run_id,
                    "task": "medal",
                    "dataset": "medal",
                    "language": lang,
                    "id": item,
                    "item_id": item,
                    "judge": judge,
                    "prompt_hash": "h",
                    "raw_output": "{}",
                    "score": None if failed else float(rng.integers(1, 6)),
                    "parse_status": "invalid_json" if failed else "ok",
                    "parse_detail": None,
                    "human_rating": float(hum.integers(1, 6)),
                    "cached": False,
                    "prompt_tokens": 10,
                    "completion_tokens": 5,
                    "extra": None,
                    "system": system,
                    "human_labels": json.dumps(human),
                    "judge_labels": None if failed else json.dumps(labels),
                }
            )
    return pd.DataFrame(rows)


def _medal_results(run_id: str, judge: str, seed: int, spearman: float) -> dict:
    rng = np.random.default_rng(seed)
    by_lang = {}
    for lang in [*LANGS, "all"]:
        res = {
            "spearman": _entry(
                spearman, [spearman - 0.1, spearman + 0.1], p_value=0.01 if lang != "zh" else 0.2
            ),
            "pearson": _entry(spearman + 0.02, None, per_dataset={"medal": {"p_value": 0.001}}),
        }
        for d in DIMS:
            res |= {
                f"{d}/{n}": _entry(float(rng.random()))
                for n in ("f1_pos", "f1_neg", "precision", "recall", "accuracy")
            }
            res[f"{d}/predicted_positive"] = _entry(float(rng.integers(0, 10)))
            res[f"{d}/reference_positive"] = _entry(4.5)
            res[f"{d}/human_ceiling"] = {"value": 0.8, "f1_pos": 0.8, "f1_neg": 0.95, "n": 16}
            res[f"{d}/mcnemar"] = {"value": 0.03 if d == "unsafe" else 0.4, "significant": d == "unsafe"}
        res |= {"macro/f1_pos": _entry(0.41), "macro/f1_neg": _entry(0.93)}
        by_lang[lang] = res
    by_lang["all"] |= {
        "spearman_pooled": _entry(spearman - 0.05, [0.1, 0.6], p_value=0.001),
        "pearson_pooled": _entry(None),
    }
    return {
        "schema_version": "1.1",
        "run": {"id": run_id, "created_at": "2025-01-01T00:00:00+00:00", "tasks": ["medal"], "n_items": 24},
        "harness": {"version": "0.1.0", "git_sha": "abcdef1234567", "git_dirty": True},
        "judge": {"spec": judge, "identity": {}},
        "tasks": {
            "medal": {
                "level": "dialogue",
                "dimension": "overall",
                "metrics": ["pearson", "spearman"],
                "issue_labels": DIMS,
                "templates": {},
            }
        },
        "results": {"medal": by_lang},
        "parse_failures": {"medal": 2},
        "datasets": {"medal": {"builder": "medal", "revision": "1.0.0", "fingerprint": "f" * 40}},
        "usage": {},
    }


def _plain_run(root: Path) -> Path:
    results = {
        "schema_version": "1.0",
        "run": {"id": "plain-1", "tasks": ["demo-turn"]},
        "judge": {"spec": "embed:minilm"},
        "tasks": {
            "demo-turn": {"level": "turn", "dimension": "relevance", "metrics": ["pearson", "spearman"]}
        },
        "results": {
            "demo-turn": {
                "en": {"spearman": _entry(0.25, [0.1, 0.4]), "pearson": _entry(None)},
                "zh": {"spearman": _entry(-0.05), "pearson": _entry(0.1)},
                "all": {"spearman": _entry(0.1, None, n_languages=2), "pearson": _entry(0.1)},
            }
        },
        "parse_failures": {"demo-turn": 0},
    }
    samples = pd.DataFrame(
        {
            "run_id": ["plain-1"] * 2,
            "task": ["demo-turn"] * 2,
            "language": ["en", "zh"],
            "score": [0.3, 0.4],
            "parse_status": ["ok", "ok"],
        }
    )
    return _write(root / "plain", results, samples)


@pytest.fixture
def runs(tmp_path):
    a = _write(
        tmp_path / "a",
        _medal_results("run-a", "openai:gpt-4.1", 1, 0.45),
        _medal_samples("run-a", "openai:gpt-4.1", 1),
    )
    b = _write(
        tmp_path / "b", _medal_results("run-b", "openai:o3", 2, 0.52), _medal_samples("run-b", "openai:o3", 2)
    )
    return a, b, _plain_run(tmp_path)


def test_build_report_writes_markdown_html_and_figures(runs, tmp_path):
    import matplotlib.image as mpimg

    res = build_report(list(runs), tmp_path / "rep", title="Judges <compared>")
    md = res.markdown.read_text()
    html = res.html.read_text()
    names = {p.name for p in res.figures}
    assert {
        "corr_spearman_medal.png",
        "corr_spearman_demo-turn.png",
        "issues_f1_medal.png",
        "issues_01-openai-gpt-4.1_medal_rate.png",
        "issues_02-openai-o3_medal_dims.png",
        "issues_02-openai-o3_medal_languages.png",
        "human_medal_rate.png",
        "human_medal_dims.png",
    } <= names
    for p in res.figures:
        img = mpimg.imread(p)
        assert img.shape[0] > 150 and img.shape[1] > 200 and float(np.std(img)) > 0.02, p
        assert f"](figures/{p.name})" in md
    assert html.count("data:image/png;base64,") == len(res.figures)
    assert 'src="figures/' not in html and "<img" in html  # self-contained
    assert "Judges &lt;compared&gt;" in html and "<h2>Leaderboard</h2>" in html
    # leaderboard: o3 (0.52) first and marked best; values formatted from results.json
    lb = md.split("## Leaderboard")[1].split("## ")[0]
    assert lb.index("openai:o3") < lb.index("openai:gpt-4.1")
    assert "| **★** | **medal** | **openai:o3** | **0.520* [0.42, 0.62]** |" in lb
    assert "0.450* [0.35, 0.55]" in lb and "0.410" in lb and "0.470" in lb  # spearman, macro F1+, pooled
    assert '<tr class="best">' in html
    # per-language table: the zh spearman p=0.2 has no star; pearson p from its single dataset
    assert "0.520 [0.42, 0.62]" in md and "0.540*" in md
    assert "## Issue detection" in md and "!Safe" in md and "human (ceiling)" in md
    assert "2 of 24 dialogues excluded" in md
    assert res.warnings == []


def test_leaderboard_and_correlation_tables(runs):
    loaded = [load_run(p) for p in runs]
    for r in loaded:
        r.label = r.judge
    lb = leaderboard_table(loaded)
    assert list(lb["judge"]) == ["openai:o3", "openai:gpt-4.1", "embed:minilm"]
    assert list(lb["best"]) == [True, False, True]
    assert lb.loc[0, "spearman"].value == pytest.approx(0.52)  # a typed MetricEntry
    ct = correlation_table(loaded, "medal", "spearman")
    assert list(ct.columns) == ["en", "de", "zh", "avg", "Combined"]
    assert fmt_entry(ct.loc["openai:o3", "zh"]) == "0.520 [0.42, 0.62]"
    assert fmt_entry(ct.loc["openai:o3", "Combined"]) == "0.470* [0.10, 0.60]"
    plain = correlation_table(loaded, "demo-turn", "pearson")
    assert fmt_entry(plain.loc["embed:minilm", "en"]) == "—"
    im = issue_metrics_table(loaded, "medal")
    assert len(im) == 2 * len(DIMS)
    assert im.loc[im["dimension"] == "unsafe", "mcnemar_significant"].all()
    assert im["human_f1_neg"].tolist() == pytest.approx([0.95] * len(im))


def _by_hand_any(s: pd.DataFrame, system: str, lang: str | None) -> float:
    sub = s[(s["system"] == system) & (s["parse_status"] == "ok")]
    if lang is not None:
        sub = sub[sub["language"] == lang]
    flags = [any(v == 1 for k, v in json.loads(x).items() if k in DIMS) for x in sub["judge_labels"]]
    return 100 * sum(flags) / len(flags)


def test_issue_rate_table_matches_hand_computation(runs):
    s = load_run(runs[0]).samples
    t = issue_rate_table(s, DIMS)
    assert list(t.index) == list(SYSTEMS) and list(t.columns) == [*LANGS, "all"]
    for system in SYSTEMS:
        for lang in LANGS:
            assert t.loc[system, lang] == pytest.approx(_by_hand_any(s, system, lang))
        assert t.loc[system, "all"] == pytest.approx(_by_hand_any(s, system, None))
    _, excluded = label_frame(s, DIMS)
    assert excluded == 2
    dims = issue_dimension_table(s, DIMS)
    ok = s[s["parse_status"] == "ok"]
    for system in SYSTEMS:
        vals = [json.loads(x)["unsafe"] for x in ok.loc[ok["system"] == system, "judge_labels"]]
        vals = [v for v in vals if v is not None]
        assert dims.loc[system, "unsafe"] == pytest.approx(100 * sum(vals) / len(vals))
        assert overall_score_table(s).loc[system] == pytest.approx(
            ok.loc[ok["system"] == system, "score"].mean()
        )
    by_lang = issue_dimension_table(s, DIMS, index="language")
    assert list(by_lang.index) == list(LANGS) and list(by_lang.columns) == DIMS


def test_human_rates_are_mean_over_annotators(runs):
    s = load_run(runs[0]).samples
    t = issue_rate_table(s, DIMS, source="human")
    for system in SYSTEMS:
        for lang in LANGS:
            sub = s[(s["system"] == system) & (s["language"] == lang)]
            rates = []
            for ann in ("a1", "a2"):
                flags = []
                for x in sub["human_labels"]:
                    vals = [v[ann] for v in json.loads(x).values() if v[ann] is not None]
                    if vals:
                        flags.append(any(v == 1 for v in vals))
                if flags:
                    rates.append(100 * sum(flags) / len(flags))
            assert t.loc[system, lang] == pytest.approx(float(np.mean(rates)))
    assert overall_score_table(s, source="human").loc["bot-a"] == pytest.approx(
        s.loc[s["system"] == "bot-a", "human_rating"].mean()
    )


def test_old_runs_and_single_runs(runs, tmp_path):
    res = build_report([runs[2]], tmp_path / "single")
    md = res.markdown.read_text()
    assert "Issue detection" not in md and "Issue rates" not in md and res.html.is_file()
    assert [p.name for p in res.figures] == ["corr_spearman_demo-turn.png"]
    # a MEDAL run written before the system/judge_labels/human_labels columns existed
    old = tmp_path / "old"
    samples = _medal_samples("run-o", "j", 3).drop(columns=list(NEW_COLUMNS))
    _write(old, _medal_results("run-o", "j", 3, 0.3), samples)
    res = build_report([old], tmp_path / "rep-old", html=False)
    assert res.html is None and not (tmp_path / "rep-old" / "report.html").exists()
    assert any("judge_labels" in w for w in res.warnings) and any("system" in w for w in res.warnings)
    assert "issues_f1_medal.png" in {p.name for p in res.figures}
    assert "## Warnings" in res.markdown.read_text()


def test_missing_values_render_as_dash(tmp_path):
    r = _medal_results("run-n", "j", 4, 0.3)
    r["results"]["medal"]["all"]["spearman"] = {"value": None, "ci": None, "n": 0}
    r["results"]["medal"]["en"].pop("pearson")
    res = build_report([_write(tmp_path / "n", r, _medal_samples("run-n", "j", 4))], tmp_path / "rep")
    md = res.markdown.read_text()
    assert "|  | medal | j | — | 0.320* |" in md  # no spearman: a dash, and no ★ for the task
    en_pearson = md.split("Pearson per language:")[1].split("\n")[4]
    assert en_pearson.startswith("| j | — |")


def test_missing_run_dir_raises(tmp_path):
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "nope"))):
        build_report([tmp_path / "nope"], tmp_path / "rep")
    with pytest.raises(ValueError):
        build_report([], tmp_path / "rep")


def _cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    app.command("report")(report_command)
    return app


def test_cli(runs, tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli"
    r = runner.invoke(_cli(), ["report", str(runs[0]), str(runs[1]), "--output", str(out), "--title", "T"])
    assert r.exit_code == 0, r.output
    assert "report.md" in r.output and "report.html" in r.output and "issues_f1_medal.png" in r.output
    assert (out / "report.html").read_text().count("<title>T</title>") == 1
    r = runner.invoke(_cli(), ["report", str(runs[0]), "--output", str(tmp_path / "c2"), "--no-html"])
    assert r.exit_code == 0 and not (tmp_path / "c2" / "report.html").exists()
    r = runner.invoke(_cli(), ["report", str(tmp_path / "missing"), "--output", str(tmp_path / "c3")])
    assert r.exit_code == 2 and "results.json" in r.output
    assert runner.invoke(_cli(), ["report", str(runs[0])]).exit_code == 2  # --output is required


def test_abbreviations_label_the_axes():
    assert ISSUE_ABBREVIATIONS["uninterpretable"] == "!Int"
    # the MEDAL task records them in results.json, where the report reads them
    from harness.tasks import get_task

    assert get_task("medal").describe()["label_names"]["uninterpretable"] == "!Int"


def test_label_names_recorded_in_results_label_the_tables(tmp_path):
    """A run that records its task's label names is shown with them, whatever the registry says."""
    results = _medal_results("run-n", "openai:gpt-4.1", 3, 0.4)
    results["tasks"]["medal"]["label_names"] = {"unsafe": "UNSAFE-X"}
    run = _write(tmp_path / "n", results, _medal_samples("run-n", "openai:gpt-4.1", 3))
    md = build_report([run], tmp_path / "rep", html=False).markdown.read_text()
    assert "UNSAFE-X" in md and "| unsafe |" not in md
