"""MEDAL builder: the MEDAL meta-evaluation benchmark (Mendonça, Lavie and Trancoso) in the common schema.

MEDAL (§5) is a multilingual open-domain dialogue meta-evaluation benchmark: 100 synthetic
user–chatbot dialogues per language in six languages (zh, en, de, fr, pt, es), each labelled by
professional annotators (two per language, one for German and Spanish; App. B) with the eight binary
issue labels of Table 1 (1 = the issue appears in some chatbot turn) and an overall 1–5 rating of the
chatbot (§5.2, the Table 11 prompt). See :mod:`dataset_builders.medal_labels` for the label set.

The source is read by :class:`~dataset_builders.common.CommonSchemaBuilder`: a directory of
``<config>.jsonl`` / ``.json`` / ``.parquet`` files ALREADY in the common schema, one file per
config. Config ``benchmark`` is the human-labelled set (dialogue level, one row per dialogue, every
annotator's labels in ``labels``, headline dimension ``overall``); other config names are accepted
as they are (a later pipeline writes ``seeds``, ``dialogues``, ``auto_labels`` ... configs), and a
``dataset.yaml`` there may add dimensions (e.g. the judge's ``other``) to the built-in table.

A directory written by the MEDAL pipeline (:mod:`dataset_builders.medal_pipeline`; it holds
``pipeline.json``) is built in *pipeline mode*: configs ``seeds`` (a table of seed contexts),
``dialogues``, ``auto_labels``, ``malformed``, ``curated`` and ``benchmark`` — dialogue records
with the extra columns of :data:`dataset_builders.medal_pipeline.publish.EXTRA_FEATURES` — and a
card with the generation setup, statistics, curation and agreement.

The default source (``source=None``) is ``hub:`` + :data:`MEDAL_HUB_ID`, the public release. Its
column layout is NOT verified offline: it must already be in the common schema, else download it
and convert it with the ``import`` builder (a YAML mapping) first. Offline it fails at once with a
:class:`~harness.data.schema.SourceUnavailableError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataset_builders.common import CommonSchemaBuilder, DatasetMetadata
from dataset_builders.medal_labels import (
    ISSUE_ABBREVIATIONS,
    ISSUE_DEFINITIONS,
    MEDAL_CITATION,
    MEDAL_HUB_ID,
    MEDAL_ISSUES,
    MEDAL_LANGUAGES,
    MEDAL_OTHER,
    MEDAL_OVERALL,
    OVERALL_DEFINITION,
)
from dataset_builders.records import ConfigData, SourceFile
from harness.data.schema import Dimension, SourceUnavailableError

BENCHMARK = "benchmark"
#: What the paper reports for the human-labelled benchmark (§5.1, App. B): dialogues and annotators.
PAPER_DIALOGUES_PER_LANGUAGE = 100
PAPER_ANNOTATORS: dict[str, int] = {lang: 1 if lang in ("de", "es") else 2 for lang in MEDAL_LANGUAGES}
LANGUAGE_NAMES = {
    "zh": "Chinese",
    "en": "English",
    "de": "German",
    "fr": "French",
    "pt": "Portuguese",
    "es": "Spanish",
}

MEDAL_DIMENSIONS: tuple[Dimension, ...] = (
    *(
        Dimension(
            name,
            ISSUE_DEFINITIONS[name],
            "binary",
            0,
            1,
            {0.0: "issue absent", 1.0: "issue present"},
            "MEDAL Table 1",
        )
        for name in MEDAL_ISSUES
    ),
    Dimension(
        MEDAL_OVERALL,
        OVERALL_DEFINITION,
        "likert",
        1,
        5,
        {1.0: "Very bad", 5.0: "Very good"},
        "MEDAL Table 11 / §5.2",
    ),
)


OTHER_DIMENSION = Dimension(
    MEDAL_OTHER,
    "Any other issue of the assistant not covered by the eight labels (judged, not human-annotated).",
    "binary",
    0,
    1,
    {0.0: "issue absent", 1.0: "issue present"},
    "MEDAL Table 11 item 9",
)


class MedalBuilder(CommonSchemaBuilder):
    """Builds MEDAL from common-schema files (default: the public Hub release, ``hub:Johndfm/medal``)."""

    name = "medal"
    version = "0.1.0"
    pretty_name = "MEDAL"
    description = (
        "MEDAL (Mendonça, Lavie and Trancoso) is a multilingual open-domain dialogue meta-evaluation "
        "benchmark: synthetic user–chatbot dialogues, generated natively in Chinese, English, German, French, "
        "Portuguese and Spanish from seed contexts (scene, persona, affective state, language) and curated by "
        "balanced sampling over issues, overall scores and chatbots (100 dialogues per language). Professional "
        "annotators marked eight binary issues of the chatbot (Table 1) and rated it overall on a 1–5 scale. "
        "Config `benchmark` holds the human-labelled dialogues, one row per dialogue with every annotator's "
        "labels; other configs (seeds, generated dialogues, automatic labels ...) are passed through as given."
    )
    license = "cc-by-nc-sa-4.0"
    citation = MEDAL_CITATION
    homepage = f"https://huggingface.co/datasets/{MEDAL_HUB_ID}"
    tags = ("dialogue-evaluation", "multilingual", "human-annotations", "multi-annotator", "meta-evaluation")
    dimensions = MEDAL_DIMENSIONS
    default_source = f"hub:{MEDAL_HUB_ID}"
    default_dimension = MEDAL_OVERALL
    allowed_languages: tuple[str, ...] | None = MEDAL_LANGUAGES
    hub_hint = (
        f". The default MEDAL source is the public release {MEDAL_HUB_ID} (its column layout is not verified "
        "offline). Offline, or if the release is not in the common schema, get the files elsewhere, convert "
        "them with the `import` builder (a YAML mapping) and pass --source DIR (DIR/benchmark.jsonl ...)"
    )

    def _reset(self) -> None:
        super()._reset()
        self._pipeline: dict[str, Any] | None = None

    def resolve_sources(self, source: Any, warnings: list[str]) -> list[SourceFile]:
        from dataset_builders.medal_pipeline import publish

        if not publish.is_pipeline_dir(source):
            return super().resolve_sources(source, warnings)
        self._reset()
        root = Path(source).expanduser()
        self._pipeline = json.loads((root / publish.PIPELINE_FILE).read_text("utf-8"))
        self.dimensions = MEDAL_DIMENSIONS + (OTHER_DIMENSION,)
        langs = ", ".join(self._pipeline.get("config", {}).get("languages", []))
        self.description = (
            "A MEDAL benchmark built with the MEDAL pipeline of dialeval-harness (Mendonça, Lavie and Trancoso, "
            f"§3–5): seed contexts (scene, persona, affective state, gender) in {langs}; user–chatbot dialogues "
            "generated natively by LLM users (with an LLM user judge in the loop) and chatbots; automatic labels "
            "by an LLM judge (8 MEDAL issues + other + overall 1–5, Table 11); malformed dialogues (role "
            "confusion, language mixing) set apart; a balanced curated subset; and, in config `benchmark`, the "
            "human annotators' labels of that subset."
        )
        self.allowed_languages = None
        self.dataset_name = self._pipeline.get("name")
        annotation = self._pipeline.get("summary", {}).get("annotation") or {}
        for c in annotation.get("odd_cells", []):  # odd cells of the annotators' files, as imported
            self.cells.record(c["file"], c["row"], c["column"], c["raw"], c["kind"], c.get("problem", ""))
        files = [(c, root / f"{c}.jsonl") for c in publish.CONFIGS if (root / f"{c}.jsonl").is_file()]
        if not files:
            raise SourceUnavailableError(f"{self.name}: no <config>.jsonl in pipeline directory {root}")
        if "benchmark" not in dict(files) and "curated" in dict(files):
            warnings.append(
                "benchmark: no human labels imported yet; fill the exported annotation sheets and rerun "
                "(config `benchmark` is written once they are in the annotation directory)"
            )
        return [SourceFile(c, publish.LEVELS[c], p, str(p.resolve())) for c, p in files]

    def build_options(self) -> dict[str, Any]:
        if self._pipeline is not None:
            return {"pipeline": self._pipeline.get("fingerprint")}
        return super().build_options()

    def normalize_languages(self, languages: Any) -> tuple[str, ...]:
        """MEDAL language codes or names; None / empty = all six."""
        if not languages:
            return ()
        wanted = super().normalize_languages(languages)
        if bad := [lang for lang in wanted if lang not in MEDAL_LANGUAGES]:
            raise ValueError(f"medal: {bad} not MEDAL languages ({', '.join(MEDAL_LANGUAGES)})")
        return tuple(lang for lang in MEDAL_LANGUAGES if lang in wanted)

    def license_note(self) -> str:
        return (
            "MEDAL is released under CC-BY-NC-SA-4.0 (non-commercial, share-alike). Its seed personas are "
            "sampled from Persona Hub (CC-BY-NC-SA-4.0), which makes the share-alike, non-commercial terms "
            "apply; its scene descriptions follow the templated sentences of Atomic10x (CC-BY-4.0). Dialogue "
            "text was generated by open-access LLMs under their own licenses."
        )

    def _apply_metadata(self, meta: DatasetMetadata, dims: tuple[Dimension, ...], path, warnings) -> None:
        """A dataset.yaml may add dimensions (e.g. the judge's ``other``); the rest is fixed."""
        builtin = {d.name: d for d in MEDAL_DIMENSIONS}
        for d in dims:
            if d.name in builtin and d != builtin[d.name]:
                raise ValueError(f"{path}: dimension {d.name!r} is built into MEDAL and cannot be redefined")
        self.dimensions = MEDAL_DIMENSIONS + tuple(d for d in dims if d.name not in builtin)
        if ignored := sorted(k for k in meta.model_fields_set if k != "dimensions"):
            warnings.append(f"medal: {path.name}: only 'dimensions' is read; ignored {ignored}")

    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        if self._pipeline is not None:
            return self._read_pipeline_config(src, languages)
        t = self._tables[src.config]
        if src.config == BENCHMARK and t.level != "dialogue" and t.level_row:
            raise t.err(
                t.level_row, "level", "the MEDAL benchmark config is dialogue-level (one row per dialogue)"
            )
        cfg = super().read_config(src, languages, warnings)
        if src.config == BENCHMARK:
            cfg.title = "MEDAL human-annotated benchmark"
            counts = per_language(cfg.records)
            off = [
                f"{lang} {n['dialogues']} dialogues / {len(n['annotators'])} annotator(s)"
                for lang, n in counts.items()
                if (n["dialogues"], len(n["annotators"]))
                != (PAPER_DIALOGUES_PER_LANGUAGE, PAPER_ANNOTATORS[lang])
            ]
            if off:
                warnings.append(
                    f"{BENCHMARK}: counts differ from the paper ({PAPER_DIALOGUES_PER_LANGUAGE} dialogues per "
                    f"language; 2 annotators, 1 for de and es): {'; '.join(off)}"
                )
        return cfg

    def _read_pipeline_config(self, src: SourceFile, languages: tuple[str, ...]) -> ConfigData:
        from dataset_builders.aggregate import aggregates_for
        from dataset_builders.medal_pipeline import publish

        records = publish.read_jsonl(src.path)
        records = [r for r in records if not languages or r["language"] in languages]
        if src.level == "table":
            return ConfigData(
                src.config,
                "table",
                records,
                title="seed contexts",
                source=src,
                extra={"file": src.path.name},
                features=publish.SEED_FEATURES,
                column_docs=publish.SEED_DOCS,
            )
        for r in records:
            r["aggregates"] = aggregates_for(r["labels"], self.dimensions)
        titles = {
            "dialogues": "generated dialogues (not malformed)",
            "auto_labels": "automatic MEDAL labels",
            "malformed": "malformed dialogues",
            "curated": "curated for annotation",
            "benchmark": "human-annotated benchmark",
        }
        return ConfigData(
            src.config,
            "dialogue",
            records,
            dimension=MEDAL_OVERALL,
            title=titles.get(src.config),
            source=src,
            extra={"file": src.path.name},
            features=publish.DIALOGUE_EXTRA_FEATURES,
            column_docs=publish.EXTRA_DOCS,
        )

    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        if self._pipeline is not None:
            from dataset_builders.medal_pipeline.publish import pipeline_card_sections

            return pipeline_card_sections(self._pipeline)
        out = super().card_sections(configs, languages)
        out += [
            "## MEDAL labels (Table 1)",
            "",
            "| label | abbreviation | definition |",
            "|---|---|---|",
            *(f"| `{n}` | {ISSUE_ABBREVIATIONS[n]} | {ISSUE_DEFINITIONS[n]} |" for n in MEDAL_ISSUES),
            f"| `{MEDAL_OVERALL}` | Overall | {OVERALL_DEFINITION} |",
            "",
            "Issues are binary (1 = the issue appears in some chatbot turn); `overall` is the annotator's "
            "1–5 rating of the chatbot over the whole dialogue, and the headline `rating` is its mean.",
            "",
        ]
        bench = next((c for c in configs if c.name == BENCHMARK), None)
        if bench is not None:
            counts = per_language(bench.records)
            out += [
                "## Dialogues and annotators per language (`benchmark`)",
                "",
                "| language | dialogues | paper | annotators | paper | annotator ids |",
                "|---|---:|---:|---:|---:|---|",
            ]
            for lang in [lang for lang in MEDAL_LANGUAGES if lang in counts]:
                n = counts[lang]
                out.append(
                    f"| {LANGUAGE_NAMES[lang]} (`{lang}`) | {n['dialogues']} | {PAPER_DIALOGUES_PER_LANGUAGE} | "
                    f"{len(n['annotators'])} | {PAPER_ANNOTATORS[lang]} | {', '.join(n['annotators'])} |"
                )
            out.append("")
        out += [
            "## Source",
            "",
            f"The default source is the public release `{MEDAL_HUB_ID}` on the Hugging Face Hub. Its column "
            "layout is **not verified offline**: it must already be in the common schema (one file per config), "
            "else convert it with the `import` builder (a YAML mapping) and build from the converted directory. "
            "`benchmark` is the human-labelled set; other configs are passed through.",
            "",
        ]
        return out


def per_language(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Language -> {dialogues: distinct dialogues, annotators: sorted annotator ids}."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        d = out.setdefault(r["language"], {"dialogues": set(), "annotators": set()})
        d["dialogues"].add(r.get("dialogue_id") or r["id"])
        d["annotators"].update(x["annotator"] for x in r["labels"])
    return {
        k: {"dialogues": len(v["dialogues"]), "annotators": sorted(v["annotators"])} for k, v in out.items()
    }
