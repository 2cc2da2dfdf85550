"""The result of turning a judge's output into a number: the value, or why there is none."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParsedScore:
    """``value`` when the output states one unambiguously; otherwise ``None`` with the status
    (``"missing_logprobs"``, ``"parse_error"``) and the reason in ``detail`` — never coerced to 0."""

    value: float | None
    status: str  # "ok" | "missing_logprobs" | "parse_error"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.value is not None
