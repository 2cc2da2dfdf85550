"""Meta-metrics as registered plug-ins: the registry of the core's statistics, the stage that runs
the applicable ones in order (sharing the correlations' bootstrap), ``--metrics`` overriding a task's
own, and a metric registered at run time appearing in the run's tables with its declared header."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.meta.builtin import default_metric_names
from harness.meta.correlation import meta_evaluate
from harness.meta.metric import MetaContext, MetaMetric, MetaOutput, MetaSettings, Need, PanelView
from harness.meta.registry import META_METRICS, table_metrics
from harness.meta.stage import evaluate_task, requested_names, select_metrics
from harness.registry import UnknownEntryError
from harness.tasks import get_task


def _samples(n: int = 30, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n).astype(float)
    rows = []
    for lang in ("en", "de"):
        score = human + rng.normal(0, 1.5, n)
        for i in range(n):
            rows.append(
                {
                    "dataset": "d1",
                    "language": lang,
                    "item_id": f"{i:03d}",
                    "id": f"{i:03d}",
                    "score": score[i],
                    "human": human[i],
                }
            )
    return pd.DataFrame(rows)


def test_every_core_statistic_is_registered_with_its_declarations():
    names = META_METRICS.names()
    for name in (
        "pearson",
        "spearman",
        "kendall",
        "dialogue_correlation",
        "system_correlation",
        "issue_detection",
        "pooled_correlation",
        "soft_labels",
        "human_ceilings",
        "high_agreement",
        "alt_test",
        "panel",
        "annotator_agreement",
        "scale_correlation",
    ):
        assert name in names and META_METRICS.origin(name) == "core"
    spearman = META_METRICS.get("spearman")
    assert spearman.is_correlation and spearman.table_column and spearman.comparable
    assert spearman.value_range == (-1.0, 1.0) and spearman.higher_is_better is True
    assert META_METRICS.get("soft_labels").higher_is_better is False
    assert META_METRICS.get("alt_test").section == "alt_test"
    assert Need.SEVERAL_JUDGES in META_METRICS.get("panel").needs
    with pytest.raises(UnknownEntryError, match="unknown meta-metric 'nope'; known: pearson"):
        select_metrics(["spearman", "nope"])


def test_the_stage_matches_the_correlation_function_and_skips_what_the_samples_lack():
    samples = _samples()
    task = get_task("demo-turn")
    settings = MetaSettings(n_bootstrap=200, seed=3)
    ctx = MetaContext(task=task, samples=samples, settings=settings, methods=("pearson", "spearman"))
    metrics = select_metrics(["spearman", "pearson", "alt_test", "panel", "system_correlation"])
    out = evaluate_task(ctx, metrics)
    assert out.computed == ["spearman", "pearson"]  # no annotators, no panel, no system ids
    assert out.sections == {}
    expected = meta_evaluate(samples, ["spearman", "pearson"], 200, 0.95, 3, task.languages).to_dict()
    for lang in ("en", "de", "all"):
        for m in ("pearson", "spearman"):
            got = out.entries[lang][m]
            assert got.value == pytest.approx(expected[lang][m]["value"], abs=1e-12)
            assert got.ci == pytest.approx(expected[lang][m]["ci"], abs=1e-12)
            assert got.n == expected[lang][m]["n"]
    assert list(out.entries) == ["en", "de", "all"]


def test_correlations_share_one_bootstrap_and_the_order_asked_is_kept():
    calls: list[list[str]] = []
    spearman = META_METRICS.get("spearman")
    original = type(spearman).compute_together.__func__  # type: ignore[attr-defined]

    def spy(cls, metrics, ctx):
        calls.append([m.name for m in metrics])
        return original(cls, metrics, ctx)

    ctx = MetaContext(task=get_task("demo-turn"), samples=_samples(), settings=MetaSettings(n_bootstrap=20))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(spearman), "compute_together", classmethod(spy))
        out = evaluate_task(ctx, select_metrics(["kendall", "spearman"]))
    assert calls == [["kendall", "spearman"]] and out.computed == ["kendall", "spearman"]
    assert set(out.entries["en"]) == {"kendall", "spearman"}


def test_requested_names_override_task_and_defaults():
    task = get_task("demo-turn")
    assert requested_names(task) == default_metric_names(task)
    assert requested_names(task)[:2] == tuple(task.metrics)
    assert requested_names(task, ["kendall", "kendall"]) == ("kendall",)
    assert "issue_detection" in default_metric_names(get_task("medal"))  # a task with issue labels


class _MeanGap(MetaMetric):
    """A metric registered at run time: mean judge score minus mean human rating, per language."""

    name = "mean_gap"
    label = "mean gap"
    description = "mean judge score minus mean human rating"
    higher_is_better = None
    value_range = None
    table_column = True

    def compute(self, ctx: MetaContext) -> MetaOutput:
        s = ctx.samples
        by_lang = {
            str(lang): {self.name: {"value": float(g["score"].mean() - g["human"].mean()), "n": len(g)}}
            for lang, g in s.groupby("language", sort=False)
        }
        by_lang["all"] = {self.name: {"value": float(s["score"].mean() - s["human"].mean()), "n": len(s)}}
        return MetaOutput.from_dicts(by_lang)


def test_a_metric_registered_at_run_time_reaches_results_and_the_table(tmp_path):
    from rich.console import Console

    from harness.run.results import results_tables
    from harness.run.runner import RunConfig, run

    judge = tmp_path / "judge.jsonl"
    judge.write_text('{"default": {"hashed_p_yes": true}}\n')
    with META_METRICS.isolated():
        META_METRICS.register(_MeanGap())
        out = run(
            RunConfig(
                judge=f"replay:{judge}",
                tasks=["demo-turn"],
                metrics=["kendall", "mean_gap"],
                n_bootstrap=20,
                output_dir=tmp_path / "run",
                show_progress=False,
                use_cache=False,
                languages=["en", "de"],
            )
        )
        doc = out.document
        assert doc.tasks["demo-turn"].meta_metrics == ["kendall", "mean_gap"]
        assert doc.tasks["demo-turn"].metrics == ["kendall"]  # the correlation methods run
        en = doc.results["demo-turn"]["en"]
        assert set(en) == {"kendall", "mean_gap"}
        s = out.samples[out.samples.language == "en"]
        assert en["mean_gap"].value == pytest.approx(s.score.mean() - s.human_rating.mean())
        assert [m.header() for m in doc.table_metrics("demo-turn")] == ["Kendall", "mean gap"]
        console = Console(width=200, record=True)
        for t in results_tables(doc):
            console.print(t)
        assert "mean gap [95% CI]" in console.export_text()
    # without the plug-in the run still reads, the column keeps its name
    assert [m.header() for m in table_metrics(["mean_gap"])] == ["mean_gap"]


def test_run_config_refuses_an_unknown_meta_metric():
    from harness.run.runner import RunConfig

    with pytest.raises(UnknownEntryError, match="unknown meta-metric 'pairwise'"):
        RunConfig(tasks=["demo-turn"], metrics=["pairwise"])


def test_a_panel_judge_exposes_its_members_through_the_judge_interface(tmp_path):
    from harness.cache import RequestCache
    from harness.judges.loader import load_judge

    files = []
    for name in "abc":
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_text('{"default": {"hashed_p_yes": true}}\n')
    task = get_task("demo-turn")
    with RequestCache(tmp_path / "c.sqlite", enabled=False) as cache:
        single = load_judge(f"replay:{files[0]}", cache)
        panel = load_judge("panel:" + "+".join(f"replay:{f}" for f in files), cache)
        assert single.panel_view(task) is None
        view = panel.panel_view(task)
    assert isinstance(view, PanelView) and len(view.members) == 3 and view.quorum == 2
    assert view.ranges == ((0.0, 1.0),) * 3


def test_entries_carry_structured_keys_and_labels():
    """A statistic written under its own name gets the metric's key; labels are the lookup keys."""
    from harness.meta.builtin import BUILTIN_META_METRICS
    from harness.meta.metric import Level, MetricKey, find

    system = next(m for m in BUILTIN_META_METRICS if m.name == "system_correlation")
    out = system.output({"en": {"system/kendall": {"value": 0.5, "n": 6}}})
    (entry,) = out.entries["en"].values()
    assert entry.key == MetricKey(
        metric="system_correlation", level=Level.SYSTEM, params={"method": "kendall"}
    )
    assert find(out.entries["en"], entry.key) is entry and entry.key.label == "system_correlation(kendall)"
    with pytest.raises(ValueError, match="does not write entries named 'pearson'"):
        system.output({"en": {"pearson": {"value": 0.1}}})


def test_an_entry_cannot_shadow_its_key_nor_share_it():
    from harness.meta.metric import KeyedEntry, MetaOutput, MetricKey

    with pytest.raises(ValueError, match=r"fields \['level'\] are the key's"):
        KeyedEntry.make(MetricKey(metric="m"), {"value": 1.0, "level": "turn"})
    with pytest.raises(ValueError, match="two entries have the key 'm'"):
        MetaOutput.from_dicts(
            {"en": {"a": {"value": 1.0}, "b": {"value": 2.0}}}, key=lambda _: MetricKey(metric="m")
        )
