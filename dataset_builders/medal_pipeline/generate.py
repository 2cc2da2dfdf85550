"""Multi-agent dialogue generation (MEDAL §3, App. C.2), turn-synchronous and resumable.

Agents: LLM **users** (Table 7 first turn, Table 8 later turns), an in-loop LLM **user judge**
(Table 10: ``"Yes."`` / ``"No. <reason>"``) and **chatbots** that see only the history (Table 9).
Every seed context × user model gets ONE first user turn, shared by all chatbots; then every
seed context × user × chatbot dialogue alternates chatbot and user turns until the user emits
``END_OF_DIALOGUE``, a user turn fails all its attempts (the dialogue is terminated), or the turn
cap (10 utterances) is reached.

Generation is **turn-synchronous**: each phase sends ONE batch per model over all active
dialogues (as the MEDAL scripts do with vLLM), so a GPU backend sees large batches and an API
backend can use the Batch API. After every phase the whole state is checkpointed atomically
(``state.json``); every request also goes through the write-through request cache. A run killed
at any point resumes from the last checkpoint, and requests of the interrupted phase that had
finished come back from the cache. A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends generation at the
next checkpoint; a model call still running after the grace period is cancelled
(:mod:`harness.interrupt`). Every sampled request carries its own decoding seed,
``100 · h + attempt`` with ``h`` a hash of (run seed, dialogue or seed context × user, turn):
regeneration attempts differ from each other, dialogues do not share random draws, and a resumed
run reproduces an uninterrupted one (:func:`request_seed`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.prompts import (
    chatbot_messages,
    clean_user_text,
    first_turn_messages,
    user_judge_choices,
    user_judge_messages,
    user_judge_verdict,
    user_turn_messages,
)
from dataset_builders.medal_pipeline.types import (
    ACTIVE,
    EMPTY_RESPONSE,
    ENDED,
    FIRST_TURN_REJECTED,
    MAX_TURNS,
    USER_REJECTED,
    Attempt,
    Dialogue,
    SeedContext,
    Turn,
    stable_id,
)
from harness import interrupt
from harness.backends.base import create_backend
from harness.cache import CachedBackend, RequestCache
from harness.spec import JudgeSpec, parse_spec
from harness.types import GenerationConfig, Request, Response

STATE_FILE = "state.json"
STATE_VERSION = 1


class ResumeError(RuntimeError):
    """The work directory holds a checkpoint of a different generation config."""


# -- models ----------------------------------------------------------------------------------------


@dataclass
class RoleModel:
    """A named agent: its spec string and a cached backend (shared by roles with the same model)."""

    role: str
    name: str
    spec: JudgeSpec
    backend: CachedBackend

    def config(self, base: GenerationConfig, seed: int | None) -> GenerationConfig:
        cfg = self.spec.generation_config(base)
        if cfg.temperature > 0 and "seed" not in self.spec.decoding:
            cfg = cfg.replace(seed=seed)
        return cfg

    def describe(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "spec": str(self.spec), **self.backend.identity()}


class ModelPool:
    """Creates each distinct model once (same kind/target/revision/options → one backend)."""

    def __init__(self, cache: RequestCache) -> None:
        self.cache = cache
        self._backends: dict[str, CachedBackend] = {}

    def get(self, role: str, name: str, spec: str) -> RoleModel:
        js = parse_spec(spec)
        key = json.dumps([js.kind, js.target, js.revision, sorted(js.options.items())], default=str)
        if key not in self._backends:
            base = JudgeSpec(js.kind, js.target, js.revision, {}, dict(js.options))
            self._backends[key] = CachedBackend(create_backend(base), self.cache)
        return RoleModel(role, name, js, self._backends[key])

    def close(self) -> None:
        for b in self._backends.values():
            b.backend.close()
        self._backends.clear()


# -- state -----------------------------------------------------------------------------------------


@dataclass
class GenerationState:
    fingerprint: str
    step: int = 0
    phase: str = "start"
    #: "<seed id>|<user>" -> {"attempts": [...], "text": str | None, "status": pending/accepted/rejected}
    first_turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    dialogues: list[Dialogue] = field(default_factory=list)
    #: dialogue id -> attempts so far of the user turn being generated
    pending: dict[str, list[Attempt]] = field(default_factory=dict)
    counters: Counter[str] = field(default_factory=Counter)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    done: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "fingerprint": self.fingerprint,
            "step": self.step,
            "phase": self.phase,
            "first_turns": {
                k: {**v, "attempts": [a.to_dict() for a in v["attempts"]]}
                for k, v in self.first_turns.items()
            },
            "dialogues": [d.to_dict() for d in self.dialogues],
            "pending": {k: [a.to_dict() for a in v] for k, v in self.pending.items()},
            "counters": dict(self.counters),
            "usage": self.usage,
            "done": self.done,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationState:
        if d.get("version") != STATE_VERSION:
            raise ResumeError(f"checkpoint version {d.get('version')!r}, expected {STATE_VERSION}")
        return cls(
            fingerprint=d["fingerprint"],
            step=d["step"],
            phase=d["phase"],
            first_turns={
                k: {**v, "attempts": [Attempt.from_dict(a) for a in v["attempts"]]}
                for k, v in d["first_turns"].items()
            },
            dialogues=[Dialogue.from_dict(x) for x in d["dialogues"]],
            pending={k: [Attempt.from_dict(a) for a in v] for k, v in d["pending"].items()},
            counters=Counter(d["counters"]),
            usage=d.get("usage", {}),
            done=d["done"],
        )


def save_state(state: GenerationState, path: Path) -> None:
    """Atomic write (temp file + rename): a kill mid-write leaves the previous checkpoint; stale temps are swept."""
    interrupt.sweep(path.parent, f"{path.stem}.tmp-*")
    tmp = path.with_name(interrupt.temp_name(f"{path.stem}.tmp-"))
    with interrupt.tracked(tmp):
        tmp.write_text(json.dumps(state.to_dict(), ensure_ascii=False, separators=(",", ":")), "utf-8")
        os.replace(tmp, path)


def load_state(path: Path) -> GenerationState | None:
    if not path.is_file():
        return None
    try:
        return GenerationState.from_dict(json.loads(path.read_text("utf-8")))
    except (ValueError, KeyError, TypeError) as e:
        raise ResumeError(f"{path}: unreadable checkpoint ({e}); delete it to start over") from None


# -- the generator ---------------------------------------------------------------------------------


def request_seed(run_seed: int, key: str, turn: int, attempt: int = 0) -> int:
    """Decoding seed of one sampled request: ``100 · h + attempt``, ``h`` from a hash of the run seed,
    the dialogue (or seed context × user for first turns) and the turn. Its last two digits are the
    attempt number (the replay backend's ``select: seed`` scripts retries with that)."""
    if not 0 <= attempt < 100:
        raise ValueError(f"attempt must be in 0..99, got {attempt}")
    h = int(hashlib.sha256(f"{run_seed}|{key}|{turn}".encode()).hexdigest()[:12], 16) % 10**7
    return 100 * h + attempt


def dialogue_id(seed_id: str, user: str, chatbot: str) -> str:
    return stable_id("dlg", seed_id, user, chatbot)


class DialogueGenerator:
    """Runs the multi-agent loop over ``seeds`` for every user × chatbot role.

    ``on_checkpoint(step, phase)`` is called after each checkpoint (progress reporting; tests use
    it to simulate a crash at a given phase).
    """

    def __init__(
        self,
        config: PipelineConfig,
        seeds: Sequence[SeedContext],
        pool: ModelPool,
        work_dir: Path,
        *,
        progress: bool = True,
        on_checkpoint: Callable[[int, str], None] | None = None,
    ) -> None:
        self.cfg = config
        self.gen = config.generation
        self.seeds = {s.id: s for s in seeds}
        self.seed_order = [s.id for s in seeds]
        self.names = config.language_name_map()
        self.users = {n: pool.get("user", n, s) for n, s in config.models.users.items()}
        self.chatbots = {n: pool.get("chatbot", n, s) for n, s in config.models.chatbots.items()}
        self.judge = pool.get("user_judge", "user_judge", config.models.user_judge)
        self.path = work_dir / STATE_FILE
        self.progress = progress
        self.on_checkpoint = on_checkpoint
        self.timing: defaultdict[str, float] = defaultdict(float)  # seconds per role / checkpoint

    # -- public ---------------------------------------------------------------------------------
    def run(self) -> GenerationState:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fp = self.cfg.generation_fingerprint()
        state = load_state(self.path)
        if state is not None and state.fingerprint != fp:
            raise ResumeError(
                f"{self.path} was generated with another config (fingerprint {state.fingerprint}, this config "
                f"{fp}: seeds, languages, models or decoding changed); use another work_dir or delete it"
            )
        if state is None:
            state = GenerationState(fingerprint=fp)
            for sid in self.seed_order:
                for user in self.users:
                    state.first_turns[f"{sid}|{user}"] = {"attempts": [], "text": None, "status": "pending"}
        elif state.done:
            return state
        else:
            state.counters["resumed"] += 1
        from dataset_builders.helpers import progress_bar

        # a stop signal ends generation at the next checkpoint (or cancels a call past the grace period)
        with (
            interrupt.graceful(),
            progress_bar(self.gen.max_turns, "generating dialogues", enabled=self.progress) as bar,
        ):
            self._bar = bar
            self._first_turn_phase(state)
            while True:
                active = [d for d in state.dialogues if d.active]
                if not active:
                    break
                # A checkpoint taken inside a user phase holds dialogues whose user turn is done and
                # dialogues still retrying theirs: the latter finish first, then all move on together.
                need_user = [d for d in active if d.turns[-1].role == "assistant"]
                if need_user:
                    self._user_phase(state, need_user)
                    bar.advance(f"turn {len(need_user[0].turns) + 1} · {len(need_user)} active")
                else:
                    self._chatbot_phase(state, active)
                    bar.advance(f"turn {len(active[0].turns)} · {len(active)} active")
        state.done = True
        state.phase = "done"
        self._checkpoint(state)
        return state

    # -- phases ---------------------------------------------------------------------------------
    def _first_turn_phase(self, state: GenerationState) -> None:
        limit = self.gen.first_turn.attempts
        while pending := [k for k, v in state.first_turns.items() if v["status"] == "pending"]:
            self._bar.describe(f"first user turns · {len(pending)} pending")
            jobs: list[tuple[str, str, list, int, list[tuple[str, str]]]] = []
            for key in pending:
                sid, user = key.split("|", 1)
                ctx = self.seeds[sid]
                attempt = len(state.first_turns[key]["attempts"])
                msgs = first_turn_messages(ctx, self.names[ctx.language], self.gen.first_turn_examples)
                jobs.append((key, user, msgs, attempt, []))
            results = self._attempt_round(state, jobs, self.gen.first_turn.generation_config(), first=True)
            for key, att in results.items():
                slot = state.first_turns[key]
                slot["attempts"].append(att)
                if att.accepted:
                    slot["status"], slot["text"] = "accepted", clean_user_text(att.text)[0]
                elif len(slot["attempts"]) >= limit:
                    slot["status"] = "rejected"
                    state.counters["first_turn_rejected"] += 1
            self._start_dialogues(state)
            self._checkpoint(
                state, f"first turn attempt {max(len(v['attempts']) for v in state.first_turns.values())}"
            )
        self._start_dialogues(state)

    def _start_dialogues(self, state: GenerationState) -> None:
        """Create the dialogues of every settled first turn (once): accepted → active with the
        shared first turn, rejected → terminated with no turn (kept for the counts)."""
        have = {d.id for d in state.dialogues}
        for sid in self.seed_order:
            for user in self.users:
                slot = state.first_turns[f"{sid}|{user}"]
                if slot["status"] == "pending":
                    continue
                for bot in self.chatbots:
                    did = dialogue_id(sid, user, bot)
                    if did in have:
                        continue
                    d = Dialogue(did, sid, self.seeds[sid].language, user, bot)
                    if slot["status"] == "accepted":
                        d.turns.append(Turn("user", slot["text"], user, list(slot["attempts"])))
                    else:
                        d.status, d.detail = FIRST_TURN_REJECTED, slot["attempts"][-1].feedback
                    state.dialogues.append(d)

    def _chatbot_phase(self, state: GenerationState, active: list[Dialogue]) -> None:
        n_turn = len(active[0].turns) + 1
        self._bar.describe(f"turn {n_turn} · chatbots · {len(active)} dialogues")
        by_bot: dict[str, list[Dialogue]] = defaultdict(list)
        for d in active:
            by_bot[d.chatbot].append(d)
        base = self.gen.chatbot.generation_config()
        for bot, dialogues in by_bot.items():
            model = self.chatbots[bot]
            reqs = [
                Request(
                    tuple(chatbot_messages([(t.role, t.text) for t in d.turns])),
                    model.config(base, request_seed(self.cfg.seed, d.id, n_turn)),
                )
                for d in dialogues
            ]
            for d, resp in zip(dialogues, self._call(state, model, reqs), strict=True):
                text = resp.text.strip()
                if not text:
                    d.status, d.detail = EMPTY_RESPONSE, f"finish_reason={resp.finish_reason}"
                    state.counters["empty_chatbot_response"] += 1
                    continue
                d.turns.append(Turn("assistant", text, bot))
                if len(d.turns) >= self.gen.max_turns:
                    d.status = MAX_TURNS
        self._checkpoint(state, f"turn {n_turn} chatbots")

    def _user_phase(self, state: GenerationState, active: list[Dialogue]) -> None:
        limit = self.gen.user_turn.attempts
        n_turn = len(active[0].turns) + 1
        by_id = {d.id: d for d in active}
        for d in active:
            state.pending.setdefault(d.id, [])
        while todo := [by_id[k] for k in list(state.pending) if k in by_id and by_id[k].active]:
            self._bar.describe(f"turn {n_turn} · users · {len(todo)} dialogues")
            jobs = []
            for d in todo:
                ctx = self.seeds[d.seed_id]
                tried = state.pending[d.id]
                prior = tried[-1] if tried else None
                history = [(t.role, t.text) for t in d.turns]
                msgs = user_turn_messages(
                    ctx,
                    self.names[ctx.language],
                    history,
                    prior.text if prior else "",
                    prior.feedback if prior else "",
                )
                jobs.append((d.id, d.user_model, msgs, len(tried), history))
            attempt_no = 1 + max(job[3] for job in jobs)
            results = self._attempt_round(state, jobs, self.gen.user_turn.generation_config(), first=False)
            for did, att in results.items():
                d = by_id[did]
                state.pending[did].append(att)
                if att.accepted:
                    text, ended = clean_user_text(att.text)
                    attempts = state.pending.pop(did)
                    if text:
                        d.turns.append(Turn("user", text, d.user_model, attempts))
                    if ended:
                        d.status = ENDED
                        state.counters["end_of_dialogue"] += 1
                    elif len(d.turns) >= self.gen.max_turns:
                        d.status = MAX_TURNS
                elif len(state.pending[did]) >= limit:
                    d.status = USER_REJECTED
                    d.detail = f"all {limit} attempts of user turn {n_turn} rejected; last: {att.feedback or att.judge_raw}"
                    state.pending.pop(did)
                    state.counters["user_turn_rejected"] += 1
            self._checkpoint(
                state,
                f"turn {n_turn} users attempt {attempt_no}",
            )
        state.pending.clear()

    # -- one attempt round: generate with each user model, then judge everything in one batch ----
    def _attempt_round(
        self,
        state: GenerationState,
        jobs: list[tuple[str, str, list, int, list[tuple[str, str]]]],
        base: GenerationConfig,
        *,
        first: bool,
    ) -> dict[str, Attempt]:
        texts: dict[str, str] = {}
        by_user: dict[str, list] = defaultdict(list)
        for job in jobs:
            by_user[job[1]].append(job)
        for user, mine in by_user.items():
            model = self.users[user]
            reqs = [
                Request(msgs, model.config(base, request_seed(self.cfg.seed, key, len(history) + 1, attempt)))
                for key, _, msgs, attempt, history in mine
            ]
            for job, resp in zip(mine, self._call(state, model, reqs), strict=True):
                texts[job[0]] = resp.text
        out: dict[str, Attempt] = {}
        to_judge: list[tuple[str, Request]] = []
        jbase = self.gen.user_judge.generation_config()
        choices = user_judge_choices(self.gen.user_judge.decide)  # ("Yes", "No") when deciding by log-probs
        for key, _, _, attempt, history in jobs:
            jcfg = self.judge.config(jbase, request_seed(self.cfg.seed, key, len(history) + 1, attempt))
            raw = texts[key].strip()
            text, ended = clean_user_text(raw)
            if not text and not (ended and not first):
                out[key] = Attempt(raw, False, "The message is empty.", "")
                state.counters["empty_user_text"] += 1
                continue
            shown = raw if not first else text  # the flag means nothing on a first turn
            to_judge.append((key, Request(tuple(user_judge_messages(history, shown)), jcfg, choices=choices)))
        if to_judge:
            verdicts = self._call(state, self.judge, [r for _, r in to_judge])
            for (key, _), resp in zip(to_judge, verdicts, strict=True):
                accepted, feedback, lps = user_judge_verdict(resp, self.gen.user_judge.decide)
                if accepted is None:
                    state.counters["user_judge_parse_failures"] += 1
                    feedback = ""
                raw = texts[key].strip()
                text = raw if not first else clean_user_text(raw)[0]
                out[key] = Attempt(text, accepted, feedback, resp.text, lps)
        kind = "first_turn" if first else "user_turn"
        for att in out.values():
            state.counters[f"{kind}_attempts"] += 1
            state.counters[f"{kind}_accepted"] += bool(att.accepted)
        return out

    def _call(self, state: GenerationState, model: RoleModel, requests: list[Request]) -> list[Response]:
        t0 = time.perf_counter()
        with interrupt.cancellable():
            responses = model.backend.generate(requests)
        self.timing[model.role] += time.perf_counter() - t0
        u = state.usage.setdefault(model.name if model.role != "user_judge" else "user_judge", {})
        for r in responses:
            u["requests"] = u.get("requests", 0) + 1
            u["cached"] = u.get("cached", 0) + int(r.cached)
            u["prompt_tokens"] = u.get("prompt_tokens", 0) + r.usage.prompt_tokens
            u["completion_tokens"] = u.get("completion_tokens", 0) + r.usage.completion_tokens
        state.counters["requests"] += len(requests)
        return responses

    def _checkpoint(self, state: GenerationState, phase: str | None = None) -> None:
        state.step += 1
        if phase:
            state.phase = phase
        t0 = time.perf_counter()
        save_state(state, self.path)
        self.timing["checkpoint"] += time.perf_counter() - t0
        if self.on_checkpoint is not None:
            self.on_checkpoint(state.step, state.phase)
        if (signum := interrupt.stop_requested()) is not None:
            raise interrupt.Interrupted(signum)  # stopped at this checkpoint: a rerun resumes from it


def generation_summary(state: GenerationState) -> dict[str, Any]:
    """Counts for the card: statuses, turns, attempts, acceptance rates, usage per model."""
    c = state.counters
    statuses = Counter(d.status for d in state.dialogues)
    made = [d for d in state.dialogues if d.turns]
    user_attempts = Counter(len(t.attempts) for d in made for t in d.turns if t.role == "user")
    return {
        "dialogues": len(state.dialogues),
        "dialogues_with_turns": len(made),
        "statuses": dict(sorted(statuses.items())),
        "avg_turns": round(sum(len(d.turns) for d in made) / len(made), 3) if made else None,
        "first_turn_pass_rate": _rate(c["first_turn_accepted"], c["first_turn_attempts"]),
        "user_turn_pass_rate": _rate(c["user_turn_accepted"], c["user_turn_attempts"]),
        "attempts_per_user_turn": {str(k): v for k, v in sorted(user_attempts.items())},
        "user_judge_parse_failures": c["user_judge_parse_failures"],
        "empty_user_text": c["empty_user_text"],
        "empty_chatbot_response": c["empty_chatbot_response"],
        "first_turn_rejected": c["first_turn_rejected"],
        "user_turn_rejected": c["user_turn_rejected"],
        "end_of_dialogue": c["end_of_dialogue"],
        "requests": c["requests"],
        "resumed": c["resumed"],
        "usage": state.usage,
    }


def _rate(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


__all__ = [
    "ACTIVE",
    "DialogueGenerator",
    "GenerationState",
    "ModelPool",
    "ResumeError",
    "RoleModel",
    "generation_summary",
    "load_state",
]
