"""The MEDAL pipeline end to end with scripted (replay) agents: every branch of the generation
loop, labelling, malformed detection, curation, the annotation round trip, resume after a crash
at any phase, and the published dataset (see tests/fixtures/medal_pipeline.py for the script)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import datasets
import pytest

from dataset_builders.medal_labels import MEDAL_ISSUES
from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.generate import ResumeError, load_state
from dataset_builders.medal_pipeline.pipeline import run_pipeline
from dataset_builders.medal_pipeline.publish import CONFIGS, read_jsonl
from harness.cache import CachedBackend
from tests.fixtures.medal_pipeline import fill_sheets, write_replay_config


class Crash(RuntimeError):
    pass


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One uninterrupted run (module-scoped); every generate() call is recorded."""
    root = tmp_path_factory.mktemp("medal")
    cfg = PipelineConfig.load(write_replay_config(root))
    calls: list[tuple[str, int]] = []
    original = CachedBackend.generate

    def spy(self, requests, on_result=None):
        calls.append((Path(self.backend.model).stem, len(list(requests))))
        return original(self, requests, on_result)

    mp = pytest.MonkeyPatch()
    mp.setattr(CachedBackend, "generate", spy)
    try:
        res = run_pipeline(cfg, progress=False)
    finally:
        mp.undo()
    state = load_state(cfg.work / "state.json")
    return cfg, res, state, calls


def _by_status(state):
    out: dict[str, list] = {}
    for d in state.dialogues:
        out.setdefault(d.status, []).append(d)
    return out


def test_every_generation_branch_is_exercised(run):
    cfg, res, state, _ = run
    by = _by_status(state)
    assert set(by) == {
        "end_of_dialogue",
        "user_rejected",
        "first_turn_rejected",
        "empty_chatbot_response",
        "max_turns",
    }
    # rejection + regeneration of the first turn: English openers are rejected once, then accepted
    en = [d for d in state.dialogues if d.language == "en" and d.turns]
    first = en[0].turns[0]
    assert [a.accepted for a in first.attempts] == [False, True]
    assert first.attempts[0].feedback == "Too formal and robotic for a casual user."
    assert first.text.startswith("I just moved")
    # later turns: the first attempt is rejected and the regeneration saw the prior attempt + feedback
    later = [t for d in en for t in d.turns[1:] if t.role == "user"]
    regen = [t for t in later if t.text.startswith("That sounds nice")]
    assert regen and all(len(t.attempts) == 2 and t.attempts[0].text.startswith("Wow!!!") for t in regen)
    assert all(t.attempts[0].feedback.startswith("Repetitive exclamations") for t in regen)
    assert all(t.text.startswith(("That sounds nice", "Thanks, that really helps")) for t in later)
    # exhausted first-turn attempts: 10 attempts, half of the judge replies unparseable (counted)
    rejected = by["first_turn_rejected"]
    assert {d.language for d in rejected} == {"pt"} and all(not d.turns for d in rejected)
    slot = state.first_turns[f"{rejected[0].seed_id}|{rejected[0].user_model}"]
    assert len(slot["attempts"]) == cfg.generation.first_turn.attempts == 10
    assert Counter(a.accepted for a in slot["attempts"]) == {False: 5, None: 5}
    assert state.counters["user_judge_parse_failures"] == 5 * len(
        {(d.seed_id, d.user_model) for d in rejected}
    )
    # exhausted later attempts: the quiz question leads to 5 rejected out-of-character replies
    for d in by["user_rejected"]:
        assert "(quiz time)" in d.turns[-1].text and d.turns[-1].role == "assistant"
        assert d.detail.startswith("all 5 attempts of user turn")
    # END_OF_DIALOGUE: the flag is stripped from the last user turn
    for d in by["end_of_dialogue"]:
        assert d.turns[-1].role == "user" and "END_OF_DIALOGUE" not in d.turns[-1].text
        assert d.turns[-1].text.startswith(("Thanks", "Muito obrigado"))
    # the turn cap: 10 utterances
    assert all(len(d.turns) == 10 for d in by["max_turns"])
    assert all(d.chatbot == "bot-b" and d.language == "pt" for d in by["empty_chatbot_response"])


def test_first_turn_is_shared_by_all_chatbots_and_chatbots_see_only_history(run):
    _, _, state, _ = run
    groups: dict[tuple[str, str], set[str]] = {}
    for d in state.dialogues:
        if d.turns:
            groups.setdefault((d.seed_id, d.user_model), set()).add(d.turns[0].text)
    assert groups and all(len(v) == 1 for v in groups.values())
    assert len({d.chatbot for d in state.dialogues}) == 2


def test_generation_is_turn_synchronous(run):
    """One generate() call per model per phase, covering every active dialogue of that model."""
    _, _, state, calls = run
    bot_calls = [n for name, n in calls if name == "bot_a"]
    n_bot_a = sum(1 for d in state.dialogues if d.chatbot == "bot-a" and d.turns)
    assert bot_calls[0] == n_bot_a  # the first chatbot turn of every bot-a dialogue in one batch
    assert bot_calls == sorted(bot_calls, reverse=True)  # then shrinking as dialogues end
    assert len(bot_calls) <= 5  # ≤ one batch per chatbot turn (10 utterances)
    judge_calls = [n for name, n in calls if name == "user_judge"]
    assert max(judge_calls) >= 16  # all candidates of a round judged in one batch


def test_labels_malformed_and_curation(run):
    cfg, res, state, _ = run
    pub = res.publish_dir
    auto = {r["id"]: r for r in read_jsonl(pub / "auto_labels.jsonl")}
    failed = [r for r in auto.values() if r["judge_status"] != "ok"]
    assert failed, "the scripted labeller returns non-JSON for some dialogues"
    for r in failed:  # never coerced to 0
        assert r["rating"] is None and all(
            x["value"] is None for x in r["labels"] if x["dimension"] in MEDAL_ISSUES
        )
        assert r["judge_raw"].startswith("The dialogue looks fine")
    assert res.summary["labels"]["parse_failures"] == len(failed)
    mal = {r["id"]: r for r in read_jsonl(pub / "malformed.jsonl")}
    reasons = Counter(x for r in mal.values() for x in r["malformed_reasons"])
    assert reasons["role_confusion"] > 0 and reasons["language_mixing"] > 0
    for r in mal.values():
        details = json.loads(r["malformed_details"])
        assert set(details) == set(r["malformed_reasons"])
    lm = [r for r in mal.values() if "language_mixing" in r["malformed_reasons"]]
    assert all("langid:" in json.loads(r["malformed_details"])["language_mixing"] for r in lm)
    assert res.summary["malformed"]["parse_failures"] > 0  # broken JSON from the checker: counted
    clean = {r["id"] for r in read_jsonl(pub / "dialogues.jsonl")}
    assert clean.isdisjoint(mal) and clean | set(mal) == set(auto)
    curated = read_jsonl(pub / "curated.jsonl")
    assert curated and {r["id"] for r in curated} <= clean
    assert all(r["judge_status"] == "ok" for r in curated)
    per_lang = Counter(r["language"] for r in curated)
    assert all(n <= cfg.curation.n_per_language for n in per_lang.values())
    seeds = [r for r in curated if r["curation_stage"] == "seed"]
    assert all(r["rating"] == 5 for r in seeds)
    for r in seeds:
        assert all(x["value"] == 0 for x in r["labels"] if x["dimension"] in MEDAL_ISSUES)
    assert (res.sheets_dir / "GUIDELINES.md").is_file()
    sheet = (res.sheets_dir / "en" / "sheet.csv").read_text("utf-8")
    assert "bot-a" not in sheet and "user-a" not in sheet  # annotators judge blind


def test_crash_at_any_phase_resumes_to_the_same_dialogues(run, tmp_path):
    _, _, reference, _ = run
    expected = [d.to_dict() for d in reference.dialogues]
    phases: list[tuple[int, str]] = []
    probe = PipelineConfig.load(write_replay_config(tmp_path / "probe"))
    run_pipeline(probe, progress=False, on_checkpoint=lambda step, phase: phases.append((step, phase)))
    kinds = ("first turn", "chatbots", "users attempt 1", "users attempt 2")
    points = [next(step for step, phase in phases if kind in phase) for kind in kinds]
    points += [phases[-2][0]]  # the last phase before "done"
    assert len(set(points)) == len(points)
    cfg = PipelineConfig.load(write_replay_config(tmp_path / "crashy"))
    # a crash INSIDE a phase: the users' batch of a first-turn round is done, the judge's call fails
    original, calls = CachedBackend.generate, []

    def flaky(self, requests, on_result=None):
        calls.append(Path(self.backend.model).stem)
        if calls.count("user_judge") == 4:
            raise Crash("judge unreachable")
        return original(self, requests, on_result)

    with pytest.MonkeyPatch.context() as mp, pytest.raises(Crash):
        mp.setattr(CachedBackend, "generate", flaky)
        run_pipeline(cfg, progress=False)
    points = [p for p in points if p > load_state(cfg.work / "state.json").step]
    assert len(points) >= 4
    for crash_at in sorted(points):

        def boom(step, phase, at=crash_at):
            if step == at:
                raise Crash(phase)

        with pytest.raises(Crash):
            run_pipeline(cfg, progress=False, on_checkpoint=boom)
        assert load_state(cfg.work / "state.json").step == crash_at
    res = run_pipeline(cfg, progress=False)
    state = load_state(cfg.work / "state.json")
    assert [d.to_dict() for d in state.dialogues] == expected
    assert state.counters["resumed"] == len(points) + 1  # every rerun went on from the last checkpoint
    usage = res.summary["generation"]["usage"]
    assert usage["user-a"]["cached"] > 0  # the interrupted phase's finished calls came from the cache


def test_changed_generation_config_refuses_to_resume(run, tmp_path):
    cfg = PipelineConfig.load(write_replay_config(tmp_path))
    run_pipeline(cfg, progress=False)
    cfg2 = PipelineConfig.load(write_replay_config(tmp_path, generation={"max_turns": 6}))
    with pytest.raises(ResumeError, match="another config"):
        run_pipeline(cfg2, progress=False)
    # curation settings are not part of the generation fingerprint: changing them just re-curates
    cfg3 = PipelineConfig.load(write_replay_config(tmp_path, curation={"n_per_language": 2, "seed": 3}))
    res = run_pipeline(cfg3, progress=False)
    assert all(n <= 2 for n in Counter(s["language"] for s in res.summary["curation"]["selected"]).values())


def test_cli_builds_versions_and_imports_annotations(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    cfg_path = write_replay_config(tmp_path)
    reg = tmp_path / "reg"
    runner = CliRunner()
    r1 = runner.invoke(
        app, ["datasets", "build", "medal", "--config", str(cfg_path), "--registry", str(reg), "-q"]
    )
    assert r1.exit_code == 0, r1.output
    assert "annotation sheets" in r1.output and "medal-test@1.0.0" in r1.output.replace("\n", "")
    v1 = reg / "medal-test" / "1.0.0"
    for config in ("seeds", "dialogues", "auto_labels", "malformed", "curated"):
        assert len(datasets.load_dataset(str(v1), config, split="test")) > 0
    assert not (v1 / "benchmark").exists()

    # a bad annotation file is a clear error naming file, row and column
    sheets = tmp_path / "work" / "annotation-sheets"
    written = fill_sheets(sheets, tmp_path / "annotations", {"en": ["ann1", "ann2"], "pt": ["ann1"]})
    good = written["en"][1].read_text("utf-8")
    lines = good.splitlines(keepends=True)
    cols = lines[0].strip().split(",")
    bad_row = lines[1].replace(",5,", ",7,") if ",5," in lines[1] else None
    if bad_row is None:  # make the overall cell of row 1 out of range whatever its value
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(good)))
        rows[0]["overall"] = "7"
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
        written["en"][1].write_text(buf.getvalue(), "utf-8")
    else:
        written["en"][1].write_text(lines[0] + bad_row + "".join(lines[2:]), "utf-8")
    r_bad = runner.invoke(
        app,
        [
            "datasets",
            "build",
            "medal",
            "--config",
            str(cfg_path),
            "--registry",
            str(reg),
            "-q",
            "--strict",
            "--bump",
            "minor",
        ],
    )
    assert r_bad.exit_code == 2
    assert "ann2.csv" in r_bad.output and "row 1" in r_bad.output and "overall" in r_bad.output
    assert "Without --strict the build goes on" in " ".join(r_bad.output.split())
    # without --strict the cell is a missing label, listed in the manifest and counted in the card
    lenient = tmp_path / "lenient"
    r_ok = runner.invoke(
        app, ["datasets", "build", "medal", "--config", str(cfg_path), "-o", str(lenient), "-q"]
    )
    assert r_ok.exit_code == 0, r_ok.output
    assert "1 unreadable labels" in r_ok.output
    [cell] = json.loads((lenient / "build_manifest.json").read_text("utf-8"))["odd_cells"]["cells"]
    assert (cell["file"], cell["row"], cell["column"], cell["raw"]) == ("en/ann2.csv", 1, "overall", "7")
    assert "| unreadable labels (`unreadable_label`) | 1 |" in (lenient / "README.md").read_text("utf-8")

    written["en"][1].write_text(good, "utf-8")
    r2 = runner.invoke(
        app,
        [
            "datasets",
            "build",
            "medal",
            "--config",
            str(cfg_path),
            "--registry",
            str(reg),
            "-q",
            "--bump",
            "minor",
        ],
    )
    assert r2.exit_code == 0, r2.output
    v2 = reg / "medal-test" / "1.1.0"
    for config in CONFIGS:
        assert len(datasets.load_dataset(str(v2), config, split="test")) > 0, config
    bench = datasets.load_dataset(str(v2), "benchmark", split="test")
    curated = datasets.load_dataset(str(v2), "curated", split="test")
    assert sorted(bench["id"]) == sorted(curated["id"])
    en = [r for r in bench if r["language"] == "en"]
    assert {x["annotator"] for x in en[0]["labels"]} == {"ann1", "ann2"}
    card = (v2 / "README.md").read_text("utf-8")
    for needle in (
        "Table 4",
        "Table 5",
        "Krippendorff",
        "Statistics (App. C.4",
        "CC-BY-4.0",
        "CC-BY-NC-SA-4.0",
        "first user turn pass rate",
        "Balanced curation",
        "@misc{mendonca2026medal",
    ):
        assert needle in card, needle
    manifest = json.loads((v2 / "build_manifest.json").read_text("utf-8"))
    assert manifest["release"]["version"] == "1.1.0"
    # the benchmark meta-evaluates judges like any MEDAL release
    labeller = tmp_path / "replay" / "labeller.jsonl"
    r3 = runner.invoke(
        app,
        [
            "run",
            "--judge",
            f"replay:{labeller}",
            "--task",
            "medal",
            "--dataset",
            str(v2),
            "--output",
            str(tmp_path / "run"),
        ],
    )
    assert r3.exit_code == 0, r3.output
    results = json.loads((tmp_path / "run" / "results.json").read_text("utf-8"))
    assert "medal" in json.dumps(results)


def _build_cmd(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The CLI command (and its environment) of a replay MEDAL build into ``tmp_path/out``."""
    cfg_path = write_replay_config(tmp_path, delay=0.01)
    cmd = [sys.executable, "-m", "harness.cli", "datasets", "build", "medal", "--config", str(cfg_path)]
    cmd += ["--output", str(tmp_path / "out"), "-q"]
    return cmd, {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}


def _signal_at_step(proc: subprocess.Popen, state_file: Path, sig: int, step_at: int = 14) -> int | None:
    """Send ``sig`` once the build's checkpoint reaches ``step_at``; the step it was sent at, or None
    when the build ended first."""
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            step = json.loads(state_file.read_text("utf-8"))["step"]
        except (FileNotFoundError, ValueError, KeyError):
            step = 0
        if step >= step_at:
            proc.send_signal(sig)
            return step
        time.sleep(0.02)
    return None


def test_sigkill_mid_generation_then_rerun_completes_identically(run, tmp_path):
    """A real kill (SIGKILL, no cleanup) of the CLI while it generates; the same command resumes."""
    _, _, reference, _ = run
    cmd, env = _build_cmd(tmp_path)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    state_file = tmp_path / "work" / "state.json"
    killed_at = _signal_at_step(proc, state_file, signal.SIGKILL)
    proc.wait(timeout=60)
    assert killed_at is not None, "the run finished before it could be killed"
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "out").exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    state = load_state(state_file)
    assert state.counters["resumed"] == 1 and state.step > killed_at
    assert [d.to_dict() for d in state.dialogues] == [d.to_dict() for d in reference.dialogues]
    for config in ("seeds", "dialogues", "auto_labels", "malformed", "curated"):
        assert len(datasets.load_dataset(str(tmp_path / "out"), config, split="test")) > 0


def test_sigterm_mid_generation_stops_at_a_checkpoint_then_rerun_completes_identically(run, tmp_path):
    """SIGTERM (as `timeout` or a job scheduler sends it) while the CLI generates: exit 143 at the
    next checkpoint, no temporary file, nothing built; the same command resumes from it."""
    _, _, reference, _ = run
    cmd, env = _build_cmd(tmp_path)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state_file = tmp_path / "work" / "state.json"
    signalled_at = _signal_at_step(proc, state_file, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert signalled_at is not None, "the run finished before it could be signalled"
    assert proc.returncode == 143, stderr
    state = load_state(state_file)
    assert not state.done and state.step >= signalled_at  # the checkpoint it stopped at
    assert f"stopped by SIGTERM: the generation checkpoint {state_file} (step {state.step}" in stderr
    assert "rerun the same command to resume" in stderr
    assert sorted(p.name for p in state_file.parent.iterdir() if p.name.startswith("state.")) == [
        "state.json"
    ]
    assert not (tmp_path / "out").exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    state = load_state(state_file)
    assert state.counters["resumed"] == 1 and state.done
    assert [d.to_dict() for d in state.dialogues] == [d.to_dict() for d in reference.dialogues]
