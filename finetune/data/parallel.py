"""Parallel multilingual dialogue text for cross-lingual training, leave-one-set-out.

A translated benchmark such as xDial-Eval holds every item in 10 languages (records ``<item_id>-<lang>``
with a shared ``item_id``). :func:`load_parallel` reads a built dataset (directory, registry
reference, or ``<builder>:<raw source>`` built on the fly) into :class:`SourceDialogue` objects —
the *contexts* of turn-level records (never the rated responses, whose quality evaluators are
scored on) and the turns of dialogue-level records — and keeps, for each, its English (pivot)
version: same item, same number of utterances. :func:`parallel_examples` makes the self-supervised
pairs of :mod:`finetune.data.selfsup` in every language (relevance: real next utterance vs a
random / hard negative; coherence: original vs shuffled / replaced dialogue) and records in each
example's ``meta["parallel"]`` the pivot-language text of its context, response and turns, and in
``meta["set"]`` the benchmark set (config) it comes from.

Leave-one-set-out: :func:`set_texts` gives the normalised texts (:func:`norm_text`) of every
utterance of a set (contexts, responses and dialogue turns, in every language); a model scored on
set S is trained only on examples for which :func:`uses_texts` is False — so it never saw any text of
S, whichever set that text came from (FED turn and dialogue sets share dialogues, for instance).
No human rating is read.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from finetune.data.selfsup import Example, ExampleList, coherence_pairs, norm_text, relevance_pairs, rng_for
from finetune.data.sources import SourceDialogue

PIVOT = "en"


@dataclass
class ParallelReport:
    """What :func:`load_parallel` read and kept."""

    source: str
    location: str = ""
    fingerprint: str | None = None
    release: str | None = None
    configs: dict[str, str] = field(default_factory=dict)  # config -> level
    records: int = 0
    duplicate_contexts: int = 0  # turn-level rows whose context (per language) was read already
    one_utterance: int = 0  # dialogues with < 2 utterances: no pair possible
    no_pivot: int = 0  # dialogues whose item has no pivot-language version
    misaligned: int = 0  # a different number of utterances than the pivot version
    kept: dict[str, int] = field(default_factory=dict)  # language -> dialogues

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.source}: {self.records} records of {len(self.configs)} sets; kept "
            f"{sum(self.kept.values())} dialogues ({', '.join(f'{k} {v}' for k, v in self.kept.items())}); "
            f"{self.duplicate_contexts} repeated contexts read once, {self.one_utterance} with < 2 utterances, "
            f"{self.no_pivot} without a {PIVOT} version, {self.misaligned} not aligned with it (skipped, counted)"
        )


@dataclass
class ParallelCorpus:
    dialogues: list[SourceDialogue]
    pivot: dict[str, SourceDialogue]  # dialogue id -> its pivot-language version (itself for the pivot)
    sets: dict[str, str]  # dialogue id -> set (config)
    report: ParallelReport


def resolve_built(source: str, registry: str | os.PathLike[str] | None = None) -> tuple[Path, dict[str, Any]]:
    """``DIR`` | ``NAME[@X.Y.Z]`` (registry) | ``<builder>:<raw source>`` -> (built directory, info)."""
    path = Path(source).expanduser()
    if path.is_dir() and (path / "build_manifest.json").is_file():
        return path, {}
    builder, sep, raw = source.partition(":")
    if sep and raw and Path(raw).expanduser().exists():
        from harness.data.resolve import prepare_dataset

        h = prepare_dataset(builder, source=str(Path(raw).expanduser().resolve()), show_progress=False)
        return Path(h.location), {"fingerprint": h.fingerprint, "release": h.revision}
    from harness.data.registry import DatasetRegistry, DatasetRegistryError

    try:
        rv = DatasetRegistry(registry).resolve(source)
    except DatasetRegistryError as e:
        raise FileNotFoundError(
            f"parallel source {source!r} is neither a built dataset directory, '<builder>:<raw source path>' "
            f"(e.g. xdial-eval:../shared/data/xdial-eval) nor a registered dataset: {e}"
        ) from None
    return rv.path, {"release": f"{rv.name}@{rv.version}"}


def _item_id(row: dict[str, Any]) -> str:
    if row.get("item_id"):
        return str(row["item_id"])
    rid, lang = str(row["id"]), str(row.get("language"))
    return rid[: -len(lang) - 1] if rid.endswith(f"-{lang}") else rid


def load_parallel(
    source: str,
    *,
    configs: Sequence[str] | None = None,
    registry: str | os.PathLike[str] | None = None,
) -> ParallelCorpus:
    """Read the contexts (turn-level sets) and dialogues (dialogue-level sets) of a built parallel
    dataset, aligned with their pivot-language (English) versions."""
    import json

    import datasets

    directory, info = resolve_built(source, registry)
    manifest = json.loads((directory / "build_manifest.json").read_text(encoding="utf-8"))
    levels = {c: e.get("level") for c, e in (manifest.get("configs") or {}).items()}
    unknown = sorted(set(configs or ()) - set(levels))
    if unknown:
        raise ValueError(f"{directory}: no config(s) {unknown}; configs: {', '.join(levels)}")
    report = ParallelReport(
        source=source,
        location=str(directory),
        fingerprint=info.get("fingerprint") or manifest.get("fingerprint"),
        release=info.get("release"),
    )
    groups: dict[tuple[str, str], dict[str, SourceDialogue]] = defaultdict(dict)
    for config in configs or list(levels):
        level = levels[config]
        if level not in ("turn", "dialogue"):
            continue
        report.configs[config] = level
        ds = datasets.load_dataset(str(directory), config, split="test")
        column = "context" if level == "turn" else "turns"
        seen: set[tuple[str, tuple[str, ...]]] = set()
        for row in ds:
            report.records += 1
            lang = str(row["language"])
            turns = [(str(t["text"]).strip(), t.get("role") or "user") for t in row.get(column) or []]
            turns = [(t, r) for t, r in turns if t]
            key = (lang, tuple(t for t, _ in turns))
            if level == "turn":
                if key in seen:
                    report.duplicate_contexts += 1
                    continue
                seen.add(key)
            if len(turns) < 2:
                report.one_utterance += 1
                continue
            d = SourceDialogue(
                id=f"{row['id']}#{column}",
                language=lang,
                turns=[t for t, _ in turns],
                roles=[r for _, r in turns],
                origin=f"{report.release or directory}:{config}",
            )
            groups[(config, _item_id(row))][lang] = d
    dialogues: list[SourceDialogue] = []
    pivot: dict[str, SourceDialogue] = {}
    sets: dict[str, str] = {}
    kept: Counter[str] = Counter()
    for (config, _), by_lang in sorted(groups.items()):
        p = by_lang.get(PIVOT)
        for lang, d in sorted(by_lang.items()):
            if p is None:
                report.no_pivot += 1
                continue
            if len(d.turns) != len(p.turns):
                report.misaligned += 1
                continue
            dialogues.append(d)
            pivot[d.id], sets[d.id] = p, config
            kept[lang] += 1
    report.kept = dict(sorted(kept.items()))
    return ParallelCorpus(dialogues, pivot, sets, report)


def set_texts(source: str, config: str, *, registry: str | os.PathLike[str] | None = None) -> set[str]:
    """Normalised text of every utterance of one set: contexts, responses, references and dialogue
    turns, in every language — what a model scored on that set must never have seen."""
    import datasets

    directory, _ = resolve_built(source, registry)
    ds = datasets.load_dataset(str(directory), config, split="test")
    out: set[str] = set()
    for row in ds:
        for col in ("context", "turns"):
            out.update(norm_text(str(t["text"])) for t in row.get(col) or [])
        for col in ("response", "reference"):
            if row.get(col):
                out.add(norm_text(str(row[col])))
    out.discard("")
    return out


def example_texts(e: Example) -> list[str]:
    """Every utterance of an example, in its language and in the pivot language."""
    par = e.meta.get("parallel") or {}
    texts = [*e.context, *(e.turns or []), *([e.response] if e.response else [])]
    texts += [
        *par.get("context", []),
        *par.get("turns", []),
        *([par["response"]] if par.get("response") else []),
    ]
    return texts


def uses_texts(e: Example, held_out: set[str]) -> bool:
    return any(norm_text(t) in held_out for t in example_texts(e))


def _sample(examples: Sequence[Example], n: int, seed: int, tag: str, sets: dict[str, str]) -> list[Example]:
    """At most ``n`` examples of one language, positives kept with their negatives, drawn round-robin
    over the sets so that no set (e.g. one with many long contexts) dominates."""
    groups: dict[tuple[str, Any], list[Example]] = defaultdict(list)
    for e in examples:
        groups[(e.source_id, e.meta.get("position"))].append(e)
    per_set: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for k in sorted(groups, key=str):
        per_set[sets[k[0]]].append(k)
    queues = []
    for name in sorted(per_set):
        keys = per_set[name]
        rng_for(seed, "parallel-sample", tag, name).shuffle(keys)
        queues.append(keys)
    order = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    out: list[Example] = []
    for k in order:
        if len(out) >= n:
            break
        out += groups[k]
    return out


def _attach(e: Example, corpus: ParallelCorpus) -> Example:
    p = corpus.pivot[e.source_id]
    par: dict[str, Any] = {"language": PIVOT, "source_id": p.id}
    if e.level == "turn":
        i = int(e.meta["position"])
        par["context"] = p.turns[i - len(e.context) : i]
        src = e.meta.get("from_dialogue")
        j = int(e.meta.get("from_position", i))
        par["response"] = corpus.pivot[src].turns[j] if src else p.turns[i]
    else:
        turns = list(p.turns)
        if "permutation" in e.meta:
            turns = [p.turns[k] for k in e.meta["permutation"]]
        for rep in e.meta.get("replaced") or []:
            pos, src, j = rep["position"], rep["from_dialogue"], rep["from_position"]
            turns[pos] = corpus.pivot[src].turns[j]
        par["turns"] = turns
    e.meta = {**e.meta, "set": corpus.sets[e.source_id], "parallel": par}
    return e


def parallel_examples(
    corpus: ParallelCorpus,
    *,
    turn_pairs: int,
    dialogue_pairs: int,
    seed: int = 0,
    max_context: int = 1,
    hard_negative_ratio: float = 0.0,
    languages: Iterable[str] | None = None,
) -> ExampleList:
    """Balanced self-supervised pairs, at most ``turn_pairs`` / ``dialogue_pairs`` per language,
    each with its pivot-language parallel text in ``meta["parallel"]`` and its set in ``meta["set"]``.
    Turn-level negatives are random utterances of other dialogues by default (``hard_negative_ratio``
    0): an utterance of the same dialogue is as close to the context as the real reply for a
    last-utterance cosine (self-supervised AUC 0.43-0.55 measured), so it teaches the calibration nothing."""
    want = set(languages) if languages else None
    chosen = [d for d in corpus.dialogues if want is None or d.language in want]
    turn_level = [d for d in chosen if d.id.endswith("#context")]
    dial_level = [d for d in chosen if d.id.endswith("#turns")]
    out: list[Example] = []
    reports: dict[str, Any] = {"load": corpus.report.to_dict()}
    if turn_pairs and turn_level:
        rel = relevance_pairs(
            turn_level, seed=seed, max_context=max_context, hard_negative_ratio=hard_negative_ratio
        )
        reports["relevance"] = asdict(rel.report)
        for lang in sorted({e.language for e in rel}):
            out += _sample(
                [e for e in rel if e.language == lang], turn_pairs, seed, f"turn:{lang}", corpus.sets
            )
    if dialogue_pairs and dial_level:
        coh = coherence_pairs(dial_level, seed=seed)
        reports["coherence"] = asdict(coh.report)
        for lang in sorted({e.language for e in coh}):
            out += _sample(
                [e for e in coh if e.language == lang], dialogue_pairs, seed, f"dialogue:{lang}", corpus.sets
            )
    out = [_attach(e, corpus) for e in out]
    reports["examples"] = dict(Counter(f"{e.level}/{e.language}" for e in out))
    return ExampleList(out, reports)
