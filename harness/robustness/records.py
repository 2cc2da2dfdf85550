"""The records of the robustness suites (``robustness.json``, ``pairwise.json``), typed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypeAlias, TypedDict

#: one side of a pair: a text, or a conversation of ``{role, text}`` turns
PairSide: TypeAlias = str | list[dict[str, str]]


class Pair(TypedDict):
    """One line of a pair file: two conversations to compare."""

    id: str
    a: PairSide
    b: PairSide
    language: str | None


class PairAnswer(TypedDict):
    """The judge's answer for one pair in one order (and repeat)."""

    id: str
    language: str | None
    order: str
    repeat: int
    choice: str | None
    winner: str | None
    raw: str
    choice_logprobs: NotRequired[Mapping[str, float | None] | None]
    prompt_hash: str
    cached: bool


class MedalC5(TypedDict):
    """MEDAL App. C.5's win / tie / loss counts and rates over pairs judged in both orders."""

    win: int
    tie: int
    loss: int
    win_rate: float | None
    tie_rate: float | None
    loss_rate: float | None


class PositionConsistency(TypedDict):
    n: int
    n_valid: int
    parse_failures: int
    parse_failures_ab: int
    parse_failures_ba: int
    consistent: int
    flips: int
    consistency_rate: float | None
    flip_rate: float | None
    n_decisive: int
    first_position: int
    first_position_rate: float | None
    tie_answers: int
    binomtest_p: float | None
    medal_c5: MedalC5


class SelfConsistency(TypedDict):
    n_units: int
    n_scored: int
    n_answers: int
    parse_failures: int
    mean_pairwise_agreement: float | None
    mean_majority_share: float | None
    unanimous_rate: float | None
