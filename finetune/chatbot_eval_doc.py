"""The typed ``results.json`` of ``harness chatbot-eval`` (schema ``chatbot-eval/1.0``).

A chatbot evaluation compares *models* (the chatbots under test) under one or more *judges*, so its
document differs from a ``harness run`` one (:class:`harness.run.document.Results`, one judge against
human labels): ``models`` and ``judges`` sections keyed by spec, and ``results`` nested
model → judge → task → :class:`ChatbotScore`. The document is validated against
:class:`ChatbotEvalResults` before it is written; :func:`chatbot_eval_schema` is its JSON Schema (the
test suite validates every chatbot-eval ``results.json`` it writes with it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.run.document import CacheInfo, HarnessInfo, Timings, first_error

SCHEMA_VERSION = "chatbot-eval/1.0"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatbotRunInfo(_Open):
    id: str
    created_at: str | None = None
    command: str | None = None
    seed: int | None = None
    limit: int | None = None
    max_context: int | None = None
    max_tokens: int | None = None
    tasks: list[str]
    n_bootstrap: int | None = None
    n_items: int = Field(ge=0, description="targets (held-out turns) evaluated")


class ModelInfo(_Open):
    identity: dict[str, Any]
    decoding: dict[str, Any]
    generation_cache_hits: int = Field(ge=0)
    empty_responses: int = Field(ge=0, description="candidates that came back empty (scored None, never 0)")


class JudgeTaskInfo(_Open):
    method: str
    decoding: dict[str, Any] | None = None
    templates: dict[str, Any] = {}


class ChatbotJudgeInfo(_Open):
    identity: dict[str, Any]
    usage: dict[str, int] = {}
    tasks: dict[str, JudgeTaskInfo]


class PairedDifference(_Open):
    model: str = Field(description="the first model, the one every other is compared with")
    n: int = Field(ge=0)
    diff: float | None = None
    relative: float | None = None
    ci: list[float | None] | None = None


class ChatbotScore(_Open):
    mean: float | None = None
    ci: list[float | None] | None = None
    n: int = Field(ge=0, description="scored candidates")
    n_items: int = Field(ge=0)
    parse_failures: int = Field(ge=0, description="verdicts without a score (left out, never 0)")
    statuses: dict[str, int]
    vs_first: PairedDifference | None = None


class ChatbotEvalResults(_Open):
    """``results.json`` of one ``harness chatbot-eval``."""

    model_config = ConfigDict(extra="allow", title="DialevalChatbotEvalResults")

    schema_version: str = Field(pattern=r"^chatbot-eval/1\.\d+$")
    run: ChatbotRunInfo
    harness: HarnessInfo
    data: dict[str, Any]
    models: dict[str, ModelInfo]
    judges: dict[str, ChatbotJudgeInfo]
    results: dict[str, dict[str, dict[str, ChatbotScore]]] = Field(
        description="model -> judge -> task -> score"
    )
    cache: CacheInfo
    timings: Timings
    environment: dict[str, Any]


def validate_chatbot_eval(doc: dict[str, Any], where: str = "results") -> ChatbotEvalResults:
    """The typed document, or a ValueError naming ``where`` and the first field that is wrong."""
    try:
        return ChatbotEvalResults.model_validate(doc)
    except ValidationError as e:
        raise ValueError(f"{where}: not a valid chatbot-eval results document: {first_error(e)}") from None


def chatbot_eval_schema() -> dict[str, Any]:
    schema = ChatbotEvalResults.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
