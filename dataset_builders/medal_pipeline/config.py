"""The MEDAL pipeline's config file (YAML), validated with pydantic.

Paths in the file are relative to the file's directory. Every model is a judge-spec string
(``hf:…``, ``vllm:…,tensor_parallel_size=4``, ``openai:…,batch_api=true``, ``replay:…``), so the
same config runs on a laptop with tiny models, on a GPU node with vLLM, or against APIs. Decoding
defaults are the paper's (App. C.2); ``key=value`` decoding overrides in a spec string win.

Example (the paper's setup, abbreviated)::

    name: medal
    seed: 0
    languages: [zh, en, de, fr, pt, es]
    seeds:
      scenes: builtin                       # or a local file, or hf:org/name[:config]
      personas: ../shared/data/personahub/tool.jsonl
      n_scenes: 400
    models:
      users:
        gpt-4o-mini: openai:gpt-4o-mini,batch_api=true
        gemma-3-27b: vllm:google/gemma-3-27b-it,tensor_parallel_size=4
      chatbots:
        qwen2.5-7b: vllm:Qwen/Qwen2.5-7B-Instruct,tensor_parallel_size=4
        aya-expanse-8b: vllm:CohereForAI/aya-expanse-8b,tensor_parallel_size=4
      user_judge: openai:gemini-2.0-flash,base_url=https://generativelanguage.googleapis.com/v1beta/openai
      labeller: openai:gpt-4.1
    curation: {n_per_language: 100}
    annotation: {dir: annotations}
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal, overload

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dataset_builders.medal_labels import MEDAL_LANGUAGES
from harness.spec import SpecError, parse_spec
from harness.types import GenerationConfig

_LANG_RE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_ROLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Decoding(_Strict):
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    presence_penalty: float = 0.0

    def generation_config(self) -> GenerationConfig:
        return GenerationConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            presence_penalty=self.presence_penalty,
        )


class UserDecoding(Decoding):
    attempts: int = Field(5, ge=1, le=100)


#: How the in-loop user judge decides (``generation.user_judge.decide``).
USER_JUDGE_DECISIONS = ("written", "logprobs")


class UserJudgeDecoding(Decoding):
    """The user judge's decoding and how it decides: ``written`` (the paper's Table 10 reply,
    ``"Yes."`` / ``"No. <reason>"``, parsed) or ``logprobs`` (accepted when P(Yes) > P(No) as the
    start of its reply, from the label words' log-probs; no feedback text for regeneration)."""

    decide: str = "written"

    @field_validator("decide")
    @classmethod
    def _decide(cls, v: str) -> str:
        if v not in USER_JUDGE_DECISIONS:
            raise ValueError(
                "generation.user_judge.decide must be 'written' (parse the judge's written reply, "
                "'Yes.' / 'No. <reason>') or 'logprobs' (accept when P(Yes) > P(No) from the label "
                f"log-probs), got {v!r}"
            )
        return v


class GenerationSettings(_Strict):
    """App. C.2: user first turn (T=1.5, presence 0.6, ≤10 attempts), later user turns (T=0.9,
    top_p=0.95, 512 tokens, ≤5 attempts), user judge (T=0.1, 64 tokens), chatbot (T=0.9, top_p=0.95,
    512 tokens); dialogues are capped at 10 turns (utterances)."""

    max_turns: int = Field(10, ge=2, le=200)
    first_turn: UserDecoding = UserDecoding(
        temperature=1.5, presence_penalty=0.6, max_tokens=512, attempts=10
    )
    user_turn: UserDecoding = UserDecoding(temperature=0.9, top_p=0.95, max_tokens=512, attempts=5)
    user_judge: UserJudgeDecoding = UserJudgeDecoding(temperature=0.1, max_tokens=64)
    chatbot: Decoding = Decoding(temperature=0.9, top_p=0.95, max_tokens=512)
    first_turn_examples: list[str] = []  # few-shot examples for Table 7's [Examples] slot


class SeedSettings(_Strict):
    scenes: str = "builtin"
    scene_field: str | None = None
    personas: str | None = None  # None: the public Persona Hub (needs the Hub)
    persona_field: str = "input persona"
    n_scenes: int = Field(400, ge=1)
    neutral_scenes_only: bool = True
    genders: list[str] = ["female", "male"]


class ModelSettings(_Strict):
    users: dict[str, str]
    chatbots: dict[str, str]
    user_judge: str
    labeller: str  # the MEDAL judge (automatic labels, §4)
    #: App. C.3 LLM check; None = the labeller; "none" = the rule-based language identifier only.
    malformed_checker: str | None = None

    @field_validator("users", "chatbots")
    @classmethod
    def _roles(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            raise ValueError("at least one model is needed")
        for name, spec in v.items():
            if not _ROLE_RE.match(name):
                raise ValueError(f"role name {name!r}: use letters, digits and _.+- only")
            _check_spec(spec, name)
        return v

    @field_validator("user_judge", "labeller")
    @classmethod
    def _spec(cls, v: str) -> str:
        return _check_spec(v, "model")

    @field_validator("malformed_checker")
    @classmethod
    def _checker(cls, v: str | None) -> str | None:
        return v if v in (None, "none") else _check_spec(v, "malformed_checker")

    def checker_spec(self) -> str | None:
        if self.malformed_checker == "none":
            return None
        return self.malformed_checker or self.labeller


def _check_spec(spec: str, role: str) -> str:
    try:
        js = parse_spec(spec)
    except SpecError as e:
        raise ValueError(f"{role}: {e}") from None
    if js.kind in ("embed", "metric", "ensemble"):
        raise ValueError(f"{role}: {spec!r} is not a generative model (use hf:, vllm:, openai: or replay:)")
    return spec


class MalformedSettings(_Strict):
    langid_min_chars: int = 20
    langid_min_prob: float = Field(0.9, gt=0, le=1)


class CurationSettings(_Strict):
    n_per_language: int = Field(100, ge=1)
    seed: int = 0
    exclude_language_mixing: bool = True


class AnnotationSettings(_Strict):
    #: filled annotation files (``<lang>/<annotator>.csv|jsonl``); absent/empty: export sheets only
    dir: str | None = "annotations"
    allow_partial: bool = False
    #: an odd cell of an annotator's file (harness.data.cells) is an error instead of a listed one
    strict: bool = False
    #: a `harness annotate` project over the curated dialogues: created by a run that finds none,
    #: its labels imported by the next run (instead of the CSV sheets)
    project: str | None = None
    #: the folder of the project file (default $DIALEVAL_HOME/annotations)
    project_dir: str | None = None
    annotators: list[str] = []
    per_item: int = Field(2, ge=1)
    #: the labels of an exported project (`harness annotate export --as NAME@X.Y.Z`) instead
    labels_from: str | None = None

    @model_validator(mode="after")
    def _project_needs_annotators(self) -> AnnotationSettings:
        if self.project is not None and len(self.annotators) < self.per_item:
            raise ValueError(
                f"annotation.project needs at least annotation.per_item ({self.per_item}) names in "
                "annotation.annotators"
            )
        if self.project is not None and self.labels_from is not None:
            raise ValueError(
                "annotation.project and annotation.labels_from are two sources of labels: give one"
            )
        return self


class PipelineConfig(_Strict):
    name: str = "medal"
    seed: int = 0
    languages: list[str] = list(MEDAL_LANGUAGES)
    #: language code -> name shown to the LLM user ("Language/Culture"); known codes have defaults
    language_names: dict[str, str] = {}
    seeds: SeedSettings = SeedSettings()
    models: ModelSettings
    generation: GenerationSettings = GenerationSettings()
    labelling_batch_size: int = Field(64, ge=1)
    malformed: MalformedSettings = MalformedSettings()
    curation: CurationSettings = CurationSettings()
    annotation: AnnotationSettings = AnnotationSettings()
    work_dir: str = "medal-work"
    cache: str | None = None  # request cache (default: <work_dir>/requests.sqlite)
    license: str = "cc-by-nc-sa-4.0"
    #: set by :meth:`load`: the config file's directory (relative paths resolve against it)
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("languages")
    @classmethod
    def _langs(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one language is needed")
        if bad := [x for x in v if not _LANG_RE.match(x)]:
            raise ValueError(f"{bad} are not ISO 639 codes (e.g. 'en', 'zh', 'pt-BR')")
        if len(set(v)) != len(v):
            raise ValueError("languages are listed twice")
        return v

    @model_validator(mode="after")
    def _names(self) -> PipelineConfig:
        missing = [lang for lang in self.languages if self.language_name(lang) is None]
        if missing:
            raise ValueError(
                f"languages {missing} have no known name: add them to language_names "
                "(code: name shown to the LLM user as Language/Culture)"
            )
        return self

    def language_name(self, code: str) -> str | None:
        if code in self.language_names:
            return self.language_names[code]
        from harness.languages import LANGUAGES

        lit = LANGUAGES.get(code) or LANGUAGES.get(code.split("-")[0])
        return lit.name.capitalize() if lit else None

    def language_name_map(self) -> dict[str, str]:
        return {lang: self.language_name(lang) or lang for lang in self.languages}

    # -- paths ------------------------------------------------------------------------------------
    @overload
    def path(self, value: str) -> Path: ...
    @overload
    def path(self, value: None) -> None: ...
    def path(self, value: str | None) -> Path | None:
        if value is None:
            return None
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def source(self, value: str | None) -> str | None:
        """A seed source: ``builtin`` and ``hf:…`` as they are, a file path made absolute."""
        if value is None or value == "builtin" or value.startswith(("hf:", "hub:")):
            return value
        return str(self.path(value))

    @property
    def work(self) -> Path:
        return self.path(self.work_dir)

    @property
    def cache_path(self) -> Path:
        return self.path(self.cache) if self.cache else self.work / "requests.sqlite"

    # -- identity ---------------------------------------------------------------------------------
    def generation_fingerprint(self) -> str:
        """What the generated dialogues depend on (a work dir generated under another one is refused)."""
        keys = {"seed", "languages", "language_names", "seeds", "generation"}
        data = self.model_dump(mode="json", include=keys)
        judge = data["generation"]["user_judge"]
        if judge["decide"] == "written":  # the default: fingerprints stay what they were before the field
            del judge["decide"]
        data["models"] = self.models.model_dump(mode="json", include={"users", "chatbots", "user_judge"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def public_dict(self) -> dict[str, Any]:
        """The config as recorded in the dataset (paths relative, no base_dir)."""
        return self.model_dump(mode="json", exclude={"base_dir"})

    @classmethod
    def load(cls, path: str | Path) -> PipelineConfig:
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"MEDAL pipeline config {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text("utf-8")) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: invalid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping at the top level")
        try:
            cfg = cls.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "<top level>"
            raise ValueError(f"{path}: key {where!r}: {err['msg']}") from None
        cfg.base_dir = path.resolve().parent
        return cfg


Stage = Literal["seeds", "generate", "label", "malformed", "curate", "annotate", "publish"]
