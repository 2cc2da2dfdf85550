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


class Wilcoxon(TypedDict):
    statistic: float | None
    p_value: float | None
    note: str | None


class Hijacked(TypedDict):
    """Pairs whose injected verdict is at the scale's maximum with no issue while the original was not."""

    count: int
    n_eligible: int
    rate: float | None


class LabelFlips(TypedDict):
    """1→0 ("hidden") and 0→1 ("raised") flips of one issue label."""

    n: int
    n_flagged: int
    hidden: int
    hidden_rate: float | None
    n_clear: int
    raised: int
    raised_rate: float | None


class IssuesCleared(TypedDict):
    count: int
    n_flagged: int
    rate: float | None


class GroupStats(TypedDict):
    """Paired statistics of one group (a language, or all) of injection pairs."""

    n_items: int
    n_pairs: int
    parse_failures: int
    parse_failures_original: int
    parse_failures_injected: int
    mean_original: float | None
    mean_injected: float | None
    mean_delta: float | None
    delta_ci: list[float] | None
    rose: float | None
    fell: float | None
    unchanged: float | None
    at_max_original: float | None
    at_max_injected: float | None
    wilcoxon: Wilcoxon
    hijacked: Hijacked
    label_flips: NotRequired[dict[str, LabelFlips]]
    all_issues_cleared: NotRequired[IssuesCleared]


class ScaleInfo(TypedDict):
    """The maximum of the task's score scale, where it comes from, and the tolerance "at max" uses."""

    max: float | None
    source: str
    tolerance: float


class InjectionPair(TypedDict):
    """One item judged as it is and with the injected note (a row of ``robustness_pairs.parquet``)."""

    language: str
    dataset: object
    id: object
    item_id: object
    injected_id: object
    injection_id: str
    injected_turns: object
    original_score: float | None
    original_ok: bool
    original_status: str
    original_labels: object
    original_raw: str
    original_prompt_hash: str
    injected_score: float | None
    injected_ok: bool
    injected_status: str
    injected_labels: object
    injected_raw: str
    injected_prompt_hash: str
    delta: float | None
