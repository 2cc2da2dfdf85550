"""How the same MEDAL pipeline config runs at scale (the paper's run: 38,400 dialogues).

Nothing in the config changes between a laptop run and the full run except the model specs:

* **GPU node — vLLM with tensor parallelism.** Users and chatbots are
  ``vllm:<model>,tensor_parallel_size=4,...``. The generator is turn-synchronous: every phase
  (first user turns, each chatbot turn, each user turn) sends ONE ``generate`` call per model over
  all active dialogues, and the vLLM backend hands that call to ``LLM.generate`` as one batch, so
  the engine sees thousands of sequences at once and schedules them with continuous batching.
  Roles with the identical spec (kind / model / revision / engine options; decoding options may
  differ) share one engine, so a model that is both a user and a chatbot is loaded once.
* **API models — the OpenAI Batch API.** ``openai:<model>,batch_api=true`` turns each of those
  ``generate`` calls into ONE batch per model per phase (half price, no rate-limit juggling). A
  batch's id is remembered in ``batch_state_dir`` until its results are handed out, every result
  goes through the write-through request cache and the generator checkpoints after every phase:
  a killed run resumes without paying for a batch twice, and a rerun sends nothing.

The tests below check both plans end to end on stand-ins: a fake ``vllm`` module whose engine
decodes the tiny random models with transformers (greedy; the sampling params are only recorded),
and a fake Batch API server on ``httpx.MockTransport``. The user judge / labeller that random
models cannot play are replay scripts. Runtime: a few seconds each.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.generate import STATE_FILE, load_state
from dataset_builders.medal_pipeline.pipeline import run_pipeline
from dataset_builders.medal_pipeline.types import EMPTY_RESPONSE
from tests.fixtures.fake_vllm import _FakeLLM  # the fake_vllm fixture comes from tests/conftest.py
from tests.fixtures.medal_pipeline import write_model_config
from tests.harness.backends.test_openai_batch import FakeBatchAPI

N_SCENES = 2
LANGUAGES = ["en", "pt"]
MAX_TURNS = 4


def _write_config(root: Path, users: dict[str, str], chatbots: dict[str, str], user_judge: str) -> Path:
    """A pipeline config: 2 scenes × 2 languages, 4 turns, a replay labeller, no LLM malformed check."""
    models = {"users": users, "chatbots": chatbots, "user_judge": user_judge}
    return write_model_config(
        root, "medal-scale", models, languages=LANGUAGES, n_scenes=N_SCENES, max_turns=MAX_TURNS
    )


def _n_jsonl(path: Path) -> int:
    return sum(1 for line in path.read_text("utf-8").splitlines() if line.strip())


def _expected_chatbot_batches(work: Path, phases: list[str]) -> list[dict[str, int]]:
    """Per ``turn N chatbots`` checkpoint, how many dialogues each chatbot had active then (from the
    final state: those with a turn N, plus those whose turn N came back empty)."""
    state = load_state(work / STATE_FILE)
    assert state is not None and state.done
    out = []
    for phase in phases:
        if not phase.endswith(" chatbots"):
            continue
        n = int(phase.split()[1])
        per_bot: Counter[str] = Counter()
        for d in state.dialogues:
            if len(d.turns) >= n or (d.status == EMPTY_RESPONSE and len(d.turns) == n - 1):
                per_bot[d.chatbot] += 1
        out.append(dict(per_bot))
    return out


# -- GPU node: vLLM with tensor parallelism ----------------------------------------------------------


def _call_kind(engine: _FakeLLM, prompts: list[dict[str, Any]]) -> str:
    """Which phase sent an ``LLM.generate`` call: read back the rendered prompts (Tables 7–9)."""
    kinds = set()
    for p in prompts:
        text = engine.tok.decode(p["prompt_token_ids"])
        if "You are a creative writer" in text:
            kinds.add("first_turn")
        elif "You are role-playing as a human" in text:
            kinds.add("user_turn")
        elif "You are a chatbot designed" in text:
            kinds.add("chatbot")
        else:
            kinds.add("unknown")
    assert len(kinds) == 1, f"one generate call mixed phases: {kinds}"
    return kinds.pop()


def test_vllm_tensor_parallel_config_runs_turn_synchronously(tmp_path, fake_vllm, tiny_qwen2, tiny_llama):
    qwen = f"vllm:{tiny_qwen2},tensor_parallel_size=4,dtype=float32,max_tokens=6"
    llama = f"vllm:{tiny_llama},tensor_parallel_size=4,dtype=float32,max_tokens=6"
    judge = tmp_path / "user_judge.jsonl"
    judge.write_text(json.dumps({"default": {"text": "Yes."}}) + "\n", "utf-8")
    path = _write_config(
        tmp_path,
        users={"qwen2-user": qwen},
        chatbots={"qwen2-bot": qwen, "llama-bot": llama},  # qwen2-bot: the user's very spec
        user_judge=f"replay:{judge}",
    )
    cfg = PipelineConfig.load(path)
    phases: list[str] = []
    result = run_pipeline(cfg, progress=False, on_checkpoint=lambda step, phase: phases.append(phase))

    # one engine per distinct model (the user and the qwen2 chatbot share theirs), 4-way tensor parallel
    assert len(_FakeLLM.instances) == 2
    engines = {e.kwargs["model"]: e for e in _FakeLLM.instances}
    assert set(engines) == {str(tiny_qwen2), str(tiny_llama)}
    for e in engines.values():
        assert e.kwargs["tensor_parallel_size"] == 4 and e.kwargs["dtype"] == "float32"
    qe, le = engines[str(tiny_qwen2)], engines[str(tiny_llama)]

    calls = {
        name: [(_call_kind(e, prompts), prompts, params) for prompts, params, _ in e.calls]
        for name, e in (("qwen", qe), ("llama", le))
    }
    assert {k for k, _, _ in calls["llama"]} == {"chatbot"}  # the llama only plays a chatbot
    assert {k for k, _, _ in calls["qwen"]} == {"first_turn", "chatbot", "user_turn"}

    # every chatbot phase reached each engine as ONE generate call over all that chatbot's active
    # dialogues (and no call besides)
    expected = _expected_chatbot_batches(cfg.work, phases)
    assert len(expected) == MAX_TURNS // 2  # turns 2 and 4
    for name, bot in (("llama", "llama-bot"), ("qwen", "qwen2-bot")):
        sizes = [len(prompts) for kind, prompts, _ in calls[name] if kind == "chatbot"]
        assert sizes == [n[bot] for n in expected if n.get(bot)], name
    state = load_state(cfg.work / STATE_FILE)
    llama_dialogues = [d for d in state.dialogues if d.chatbot == "llama-bot" and d.turns]
    n_contexts = N_SCENES * len(LANGUAGES)
    assert len(llama_dialogues) == n_contexts  # every first turn was accepted (the judge says "Yes.")
    assert len(calls["llama"][0][1]) == len(llama_dialogues)
    # the first turns of all seed contexts went out in one call too (greedy engine: a first turn that
    # decodes to nothing is retried, so count the attempt rounds from the checkpoints)
    first_rounds = [p for p in phases if p.startswith("first turn attempt")]
    first_calls = [prompts for kind, prompts, _ in calls["qwen"] if kind == "first_turn"]
    assert len(first_calls) == len(first_rounds) and len(first_calls[0]) == n_contexts
    user_calls = [prompts for kind, prompts, _ in calls["qwen"] if kind == "user_turn"]
    assert len(user_calls) == len([p for p in phases if " users attempt " in p])

    # decoding is MEDAL's (App. C.2) with the spec's max_tokens; every sampled request has a seed
    for name in calls:
        for kind, _, params in calls[name]:
            for sp in params:
                kw = sp.kw
                assert kw["max_tokens"] == 6 and isinstance(kw.get("seed"), int), (kind, kw)
                if kind == "chatbot":
                    assert (kw["temperature"], kw["top_p"], kw["presence_penalty"]) == (0.9, 0.95, 0.0)
                elif kind == "first_turn":
                    assert (kw["temperature"], kw["presence_penalty"], kw["top_p"]) == (1.5, 0.6, 1.0)
                else:
                    assert (kw["temperature"], kw["top_p"]) == (0.9, 0.95)
    assert calls["qwen"][0][0] == "first_turn"

    # the run completes and publishes
    g = result.summary["generation"]
    assert g["dialogues"] == n_contexts * 2 and g["first_turn_pass_rate"] is not None
    assert set(g["usage"]) == {"qwen2-user", "qwen2-bot", "llama-bot", "user_judge"}
    assert (result.publish_dir / "dialogues.jsonl").is_file()
    assert _n_jsonl(result.publish_dir / "dialogues.jsonl") == sum(1 for d in state.dialogues if d.turns) > 0
    assert all(len(d.turns) <= MAX_TURNS for d in state.dialogues)


# -- API models: the OpenAI Batch API ------------------------------------------------------------------

BASE = "http://fake/v1"


class RoutedBatchAPI(FakeBatchAPI):
    """The fake Batch API answering each chat completion by the body's ``model``: the user judge
    says "Yes.", users and chatbots say a (distinct, deterministic) sentence."""

    def completion(self, body: dict) -> dict:  # type: ignore[override]
        out = FakeBatchAPI.completion(body)
        model = body["model"]
        tag = hashlib.sha256(json.dumps([model, body["messages"]]).encode()).hexdigest()[:8]
        if model == "judge":
            text = "Yes."
        elif model.startswith("user"):
            text = f"I just moved here and would love to meet people, any tips? ({tag})"
        else:
            text = f"That sounds exciting! Have you thought about joining a local club? ({tag})"
        out["choices"][0]["message"]["content"] = text
        return out

    def batch_models(self) -> list[str]:
        """The model of every batch created, in order (one upload per batch)."""
        assert len(self.uploads) == len(self.creates)
        models = []
        for lines in self.uploads:
            (model,) = {x["body"]["model"] for x in lines}  # a batch never mixes models
            models.append(model)
        return models


def test_openai_batch_api_config_sends_one_batch_per_model_per_phase(tmp_path, monkeypatch):
    from harness.backends.openai_api import OpenAIBackend

    api = RoutedBatchAPI()
    init = OpenAIBackend.__init__

    def with_fake_server(self: OpenAIBackend, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("batch_transport", api.transport)  # a Python-only option of the backend
        init(self, *args, **kwargs)

    monkeypatch.setattr(OpenAIBackend, "__init__", with_fake_server)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-scale-test")
    batch_state = tmp_path / "batches"

    def spec(model: str) -> str:
        return f"openai:{model},batch_api=true,base_url={BASE},batch_poll_seconds=0,batch_state_dir={batch_state}"

    path = _write_config(
        tmp_path,
        users={"user-a": spec("user-a"), "user-b": spec("user-b")},
        chatbots={"bot-a": spec("bot-a"), "bot-b": spec("bot-b")},
        user_judge=spec("judge"),
    )
    cfg = PipelineConfig.load(path)

    # the batches created in each phase: everything sent between two checkpoints
    per_phase: list[tuple[str, list[str], list[int]]] = []

    def on_checkpoint(step: int, phase: str) -> None:
        done = sum(len(models) for _, models, _ in per_phase)
        models = api.batch_models()[done:]
        sizes = [len(lines) for lines in api.uploads[done:]]
        per_phase.append((phase, models, sizes))

    result = run_pipeline(cfg, progress=False, on_checkpoint=on_checkpoint)

    n_contexts = N_SCENES * len(LANGUAGES)
    users, bots = ["user-a", "user-b"], ["bot-a", "bot-b"]
    n_dialogues = n_contexts * len(users) * len(bots)
    phases = [p for p, _, _ in per_phase]
    # everything is accepted at once and nobody says END_OF_DIALOGUE: 4 turns, 4 phases, then done
    shape = [re.sub(r"attempt \d+", "attempt", p) for p in phases]
    assert shape == [
        "first turn attempt",
        "turn 2 chatbots",
        "turn 3 users attempt",
        "turn 4 chatbots",
        "done",
    ]
    for phase, models, sizes in per_phase:
        got = sorted(zip(models, sizes, strict=True))
        if phase.startswith("first turn"):  # per user model over its seed contexts + one judge batch
            want = [("judge", n_contexts * len(users)), *((u, n_contexts) for u in users)]
        elif phase.endswith("chatbots"):  # one batch per chatbot over all its active dialogues
            want = [(b, n_contexts * len(users)) for b in bots]
        elif " users " in phase:  # one batch per user model over its active dialogues + one judge batch
            want = [("judge", n_dialogues), *((u, n_contexts * len(bots)) for u in users)]
        else:
            want = []
        assert got == sorted(want), phase
    # in all: one batch per (phase × model) generate call
    n_user_rounds = sum(p.startswith("first turn") or " users " in p for p in phases)
    assert Counter(api.batch_models()) == {
        "judge": n_user_rounds,
        **dict.fromkeys(users, n_user_rounds),
        **dict.fromkeys(bots, len(phases) - 1 - n_user_rounds),
    }
    assert list(batch_state.glob("*.json")) == []  # every batch handed out: nothing left to resume
    g = result.summary["generation"]
    assert g["dialogues"] == g["dialogues_with_turns"] == n_dialogues
    assert g["statuses"] == {"max_turns": n_dialogues} and g["first_turn_pass_rate"] == pytest.approx(1.0)
    assert _n_jsonl(result.publish_dir / "dialogues.jsonl") == n_dialogues
    published = (result.publish_dir / "dialogues.jsonl").read_bytes()
    n_batches = len(api.creates)

    # a rerun of the same config creates no batch: generation is done (state.json) ...
    run_pipeline(cfg, progress=False)
    assert len(api.creates) == n_batches
    # ... and with the checkpoint gone, every request comes back from the request cache
    (cfg.work / STATE_FILE).unlink()
    again = run_pipeline(cfg, progress=False)
    assert len(api.creates) == n_batches and len(api.uploads) == n_batches
    usage = again.summary["generation"]["usage"]
    assert all(u["cached"] == u["requests"] > 0 for u in usage.values()), usage
    assert (again.publish_dir / "dialogues.jsonl").read_bytes() == published
