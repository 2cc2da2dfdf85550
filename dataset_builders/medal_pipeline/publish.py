"""Publishing the MEDAL pipeline's output as ONE versioned dataset.

The pipeline writes a *publish directory* (``<work_dir>/publish``): ``pipeline.json`` (config,
models, decoding, statistics, curation, agreement, template hashes, counts) and one JSONL file per
config. :class:`~dataset_builders.medal.MedalBuilder` recognises it by ``pipeline.json`` and builds
the dataset from it (Parquet + card + manifest), and the registry makes it an immutable version.

Configs:

=============  =========  ===========================================================================
config         level      rows
=============  =========  ===========================================================================
``seeds``      table      seed contexts (scene, persona, affective state, gender, language)
``dialogues``  dialogue   generated dialogues NOT flagged as malformed
``auto_labels`` dialogue  every generated dialogue with the MEDAL judge's labels (annotator
                          ``judge:<labeller>``; 8 issues + ``other`` + ``overall``)
``malformed``  dialogue   dialogues flagged as malformed (role confusion / language mixing), with why
``curated``    dialogue   the balanced selection for human annotation, with the judge's labels
``benchmark``  dialogue   the curated dialogues with the human annotators' labels
=============  =========  ===========================================================================

Dialogue configs are common-schema records plus the columns of :data:`EXTRA_FEATURES`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Features, List, Value

from dataset_builders.medal_labels import MEDAL_ISSUES, MEDAL_OTHER, MEDAL_OVERALL
from dataset_builders.medal_pipeline.types import AutoLabel, Dialogue, MalformedCheck, SeedContext
from harness.data.schema import DIALOGUE_FEATURES

PIPELINE_FILE = "pipeline.json"
CONFIGS: tuple[str, ...] = ("seeds", "dialogues", "auto_labels", "malformed", "curated", "benchmark")
LEVELS: dict[str, str] = {c: ("table" if c == "seeds" else "dialogue") for c in CONFIGS}

SEED_FEATURES = Features(
    {
        "id": Value("string"),
        "scene_id": Value("string"),
        "scene": Value("string"),
        "scene_source": Value("string"),
        "persona_id": Value("string"),
        "persona": Value("string"),
        "persona_source": Value("string"),
        "language": Value("string"),
        "affective_state": Value("string"),
        "affect_quadrant": Value("string"),
        "scene_affect": Value("string"),
        "gender": Value("string"),
        "scene_gender": Value("string"),
    }
)
SEED_DOCS = {
    "id": "stable seed-context id (hash of scene, persona, affective state, gender, language)",
    "scene_id": "id of the scene in its source",
    "scene": "scene description shown to the LLM user (affective state appended when sampled)",
    "scene_source": "where the scene came from (builtin, a file, hf:...)",
    "persona_id": "id of the persona",
    "persona": "persona description",
    "persona_source": "where the persona came from",
    "language": "target language (ISO 639)",
    "affective_state": "sampled affective state (null when the scene had one)",
    "affect_quadrant": "circumplex quadrant of the sampled state",
    "scene_affect": "affect keyword found in the scene (then none was sampled)",
    "gender": "sampled gender (gender-neutral scenes only)",
    "scene_gender": "gender detected in the scene by the rule-based check",
}

EXTRA_FEATURES: dict[str, Any] = {
    "seed_id": Value("string"),
    "user_model": Value("string"),
    "chatbot": Value("string"),
    "affective_state": Value("string"),
    "gender": Value("string"),
    "end_reason": Value("string"),
    "end_detail": Value("string"),
    "user_attempts": List(Value("int32")),
    "malformed_reasons": List(Value("string")),
    "malformed_details": Value("string"),
    "judge_status": Value("string"),
    "judge_comments": Value("string"),
    "judge_raw": Value("string"),
    "curation_stage": Value("string"),
    "curation_order": Value("int32"),
    "curation_target": Value("string"),
}
EXTRA_DOCS = {
    "seed_id": "the seed context (config `seeds`)",
    "user_model": "role name of the LLM user",
    "chatbot": "role name of the chatbot (also in `system`)",
    "affective_state": "affective state of the seed context, if sampled",
    "gender": "gender of the seed context, if sampled",
    "end_reason": "why generation stopped: end_of_dialogue, max_turns, user_rejected, empty_chatbot_response",
    "end_detail": "detail of end_reason (e.g. the user judge's last feedback)",
    "user_attempts": "generation attempts of each user turn (1 = accepted at once)",
    "malformed_reasons": "role_confusion / language_mixing (empty = not malformed)",
    "malformed_details": "JSON: reason -> explanation (LLM check and/or language identifier)",
    "judge_status": "parse status of the MEDAL judge's verdict (ok / parse_error ...)",
    "judge_comments": "JSON: the MEDAL judge's comment per dimension",
    "judge_raw": "the MEDAL judge's raw output",
    "curation_stage": "seed (one issue-free overall-5 dialogue per user–chatbot pair) or balance",
    "curation_order": "position in the curation order",
    "curation_target": "the category being balanced when the dialogue was picked",
}
DIALOGUE_EXTRA_FEATURES = Features({**DIALOGUE_FEATURES, **EXTRA_FEATURES})


def judge_annotator(labeller_spec: str) -> str:
    """Annotator id of the automatic labels: ``judge:<model>``."""
    from harness.spec import parse_spec

    return f"judge:{parse_spec(labeller_spec).target}"


def seed_record(ctx: SeedContext) -> dict[str, Any]:
    return {k: ctx.to_dict().get(k) for k in SEED_FEATURES}


def dialogue_record(
    d: Dialogue,
    config: str,
    seeds: Mapping[str, SeedContext],
    *,
    label: AutoLabel | None = None,
    annotator: str | None = None,
    check: MalformedCheck | None = None,
    curation: Mapping[str, Any] | None = None,
    human_labels: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A dialogue-level common-schema record plus :data:`EXTRA_FEATURES`.

    ``label`` + ``annotator``: the judge's labels go into ``labels`` (None stays None = missing);
    ``human_labels`` (already in ``{annotator, dimension, value, raw}`` form) replace them."""
    ctx = seeds.get(d.seed_id)
    labels: list[dict[str, Any]] = []
    rating = None
    if human_labels is not None:
        labels = list(human_labels)
        overall = [x["value"] for x in labels if x["dimension"] == MEDAL_OVERALL and x["value"] is not None]
        rating = sum(overall) / len(overall) if overall else None
    elif label is not None:
        who = annotator or "judge"
        for name in (*MEDAL_ISSUES, MEDAL_OTHER):
            v = label.labels.get(name)
            labels.append(
                {
                    "annotator": who,
                    "dimension": name,
                    "value": None if v is None else float(v),
                    "raw": None if v is None else str(v),
                }
            )
        labels.append(
            {
                "annotator": who,
                "dimension": MEDAL_OVERALL,
                "value": label.overall,
                "raw": None if label.overall is None else f"{label.overall:g}",
            }
        )
        rating = label.overall
    cur = curation or {}
    return {
        "id": d.id,
        "item_id": d.id,
        "dataset": config,
        "language": d.language,
        "level": "dialogue",
        "dialogue_id": d.id,
        "system": d.chatbot,
        "scene": ctx.scene if ctx else None,
        "persona": ctx.persona if ctx else None,
        "turns": d.messages(),
        "rating": rating,
        "dimension": MEDAL_OVERALL,
        "labels": labels,
        "aggregates": [],
        "seed_id": d.seed_id,
        "user_model": d.user_model,
        "chatbot": d.chatbot,
        "affective_state": ctx.affective_state if ctx else None,
        "gender": ctx.gender if ctx else None,
        "end_reason": d.status,
        "end_detail": d.detail or None,
        "user_attempts": [len(t.attempts) for t in d.turns if t.role == "user"],
        "malformed_reasons": list(check.reasons) if check else [],
        "malformed_details": json.dumps(check.details, ensure_ascii=False)
        if check and check.details
        else None,
        "judge_status": label.status if label else None,
        "judge_comments": json.dumps(label.comments, ensure_ascii=False)
        if label and label.comments
        else None,
        "judge_raw": label.raw if label else None,
        "curation_stage": cur.get("stage"),
        "curation_order": cur.get("order"),
        "curation_target": cur.get("target"),
    }


def write_jsonl(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Write ``records`` to ``path`` atomically (a temporary file renamed into place; removed if the
    write is interrupted)."""
    tmp = path.with_suffix(".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def is_pipeline_dir(source: Any) -> bool:
    return (
        source is not None and not str(source).startswith("hub:") and (Path(source) / PIPELINE_FILE).is_file()
    )


def pipeline_card_sections(meta: Mapping[str, Any]) -> list[str]:
    """Card sections of a pipeline build: generation setup, statistics, curation, agreement."""
    out = ["## How this dataset was generated (MEDAL pipeline)", ""]
    models = meta.get("models", {})
    out += ["| role | name | model spec |", "|---|---|---|"]
    for role in ("users", "chatbots"):
        for name, spec in (models.get(role) or {}).items():
            out.append(f"| {role[:-1]} | `{name}` | `{spec}` |")
    for role in ("user_judge", "labeller", "malformed_checker"):
        if models.get(role):
            out.append(f"| {role} | | `{models[role]}` |")
    out.append("")
    gen = meta.get("config", {}).get("generation", {})
    if gen:
        out += [
            "Decoding (MEDAL App. C.2 defaults unless overridden):",
            "",
            "```json",
            json.dumps(gen, indent=1, ensure_ascii=False),
            "```",
            "",
        ]
    out += meta.get("markdown", {}).get("generation", [])
    for key in ("warnings",):
        if meta.get(key):
            out += ["### Pipeline warnings", "", *(f"- {w}" for w in meta[key]), ""]
    for section in ("statistics", "malformed", "curation", "annotation"):
        out += meta.get("markdown", {}).get(section, [])
    if meta.get("template_hashes"):
        out += ["### Prompt templates (MEDAL Tables 7–11)", "", "| template | sha256[:16] |", "|---|---|"]
        out += [f"| {k} | `{v}` |" for k, v in meta["template_hashes"].items()]
        out.append("")
    out += [
        "### Seed sources and licenses",
        "",
        "- Scenes: Atomic10x-style templated sentences (Atomic10x, West et al. 2022: CC-BY-4.0) — "
        f"source `{meta.get('config', {}).get('seeds', {}).get('scenes')}`.",
        "- Personas: Persona Hub (Ge et al. 2024: CC-BY-NC-SA-4.0) — source "
        f"`{meta.get('config', {}).get('seeds', {}).get('personas')}`. Its share-alike, non-commercial terms "
        "make this dataset CC-BY-NC-SA-4.0.",
        "- Dialogue text was generated by the models above, under their own terms of use.",
        "",
    ]
    return out
