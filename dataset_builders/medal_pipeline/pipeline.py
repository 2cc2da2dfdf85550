"""The MEDAL pipeline end to end: ``harness datasets build medal --config medal.yaml``.

Stages (each writes into ``work_dir``; a rerun reuses what is done):

1. seed contexts (:mod:`.seeds`) → ``seeds.jsonl``;
2. multi-agent generation (:mod:`.generate`), turn-synchronous, checkpointed → ``state.json``;
3. automatic labels with the MEDAL judge (:mod:`.labels`) and
4. malformed-dialogue detection (:mod:`.malformed`) — both through the request cache, so a rerun
   (or a re-judging with another labeller) never regenerates dialogues;
5. statistics (:mod:`.stats`, Table 2, Fig. 2) → ``statistics.json``, ``figures/``;
6. balanced curation (:mod:`.curate`, §5.1) → ``curation.json``;
7. annotation sheets for the curated dialogues → ``annotation-sheets/`` and, when filled files are
   in ``annotation.dir``, their import, validation and agreement (:mod:`.annotation`, Tables 4–5);
   or, with ``annotation.project``, a ``harness annotate`` project over them (created after the
   run that finds none) whose labels the next run imports (``annotation.labels_from``: those of
   an exported project);
8. the publish directory (:mod:`.publish`) that the ``medal`` builder turns into a dataset version.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builders.medal_pipeline import publish
from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.generate import DialogueGenerator, ModelPool, generation_summary
from dataset_builders.medal_pipeline.prompts import template_hashes
from dataset_builders.medal_pipeline.types import Dialogue, SeedContext
from harness.cache import RequestCache
from harness.spec import parse_spec

SHEETS_DIR = "annotation-sheets"
#: requests per Ray shard (a generation phase is one big call): a batch size a vLLM engine per
#: worker stays busy with
SHARD_SIZE = 256


@dataclass
class PipelineResult:
    work_dir: Path
    publish_dir: Path
    sheets_dir: Path
    summary: dict[str, Any]
    benchmark: bool
    warnings: list[str] = field(default_factory=list)


def _say(progress: bool, msg: str) -> None:
    if progress:
        from rich.console import Console

        Console(stderr=True).print(f"[bold]medal[/] {msg}")


def build_seeds(cfg: PipelineConfig) -> list[SeedContext]:
    from dataset_builders.medal_pipeline.seeds import load_personas, load_scenes, sample_seed_contexts

    scenes = load_scenes(cfg.source(cfg.seeds.scenes), field=cfg.seeds.scene_field)
    personas = load_personas(cfg.source(cfg.seeds.personas), field=cfg.seeds.persona_field)
    return sample_seed_contexts(
        scenes,
        personas,
        cfg.languages,
        cfg.seeds.n_scenes,
        seed=cfg.seed,
        neutral_scenes_only=cfg.seeds.neutral_scenes_only,
        genders=cfg.seeds.genders,
    )


def pipeline_warnings(cfg: PipelineConfig) -> list[str]:
    """Role overlaps worth knowing: the judge is never silently the model under test."""
    out = []
    targets = {n: parse_spec(s).target for n, s in cfg.models.chatbots.items()}
    for role, spec in (("labeller", cfg.models.labeller), ("malformed_checker", cfg.models.checker_spec())):
        if spec is None:
            continue
        t = parse_spec(spec).target
        for bot, bt in targets.items():
            if bt == t:
                out.append(
                    f"the {role} ({t}) is also the chatbot {bot!r}: its labels of {bot}'s dialogues are self-grades"
                )
    return out


def run_pipeline(
    cfg: PipelineConfig,
    *,
    progress: bool = True,
    on_checkpoint: Callable[[int, str], None] | None = None,
) -> PipelineResult:
    from dataset_builders.medal_pipeline.annotation.sheets import (
        agreement_markdown,
        agreement_tables,
        benchmark_records,
        export_sheets,
        import_annotations,
    )
    from dataset_builders.medal_pipeline.curate import CurationConfig, curate, curation_markdown
    from dataset_builders.medal_pipeline.labels import (
        label_dialogues,
        label_summary,
        mentions_language_mixing,
    )
    from dataset_builders.medal_pipeline.malformed import detect_malformed, malformed_summary
    from dataset_builders.medal_pipeline.stats import (
        issue_heatmap,
        issue_rates,
        issue_type_heatmap,
        language_statistics,
        statistics_json,
        statistics_markdown,
    )
    from harness.judges import load_judge

    work = cfg.work
    work.mkdir(parents=True, exist_ok=True)
    warnings = pipeline_warnings(cfg)
    cache = RequestCache(cfg.cache_path)
    try:
        # 1. seeds
        seeds = build_seeds(cfg)
        seed_map = {s.id: s for s in seeds}
        publish.write_jsonl(work / "seeds.jsonl", [s.to_dict() for s in seeds])
        _say(
            progress,
            f"{len(seeds)} seed contexts ({cfg.seeds.n_scenes} scenes × {len(cfg.languages)} languages)",
        )

        # 2. generation
        pool = ModelPool(cache)
        try:
            gen = DialogueGenerator(cfg, seeds, pool, work, progress=progress, on_checkpoint=on_checkpoint)
            state = gen.run()
        finally:
            pool.close()
        gsum = generation_summary(state)
        dialogues = [d for d in state.dialogues if d.turns]
        _say(progress, f"{len(dialogues)} dialogues generated ({gsum['statuses']})")

        # 3. automatic labels (MEDAL judge) and 4. malformed detection
        judge = load_judge(cfg.models.labeller, cache, seed=cfg.seed)
        try:
            labels = label_dialogues(dialogues, judge, batch_size=cfg.labelling_batch_size, progress=progress)
            checker_spec = cfg.models.checker_spec()
            other = None
            if checker_spec is None:
                checker = None
            elif checker_spec == cfg.models.labeller and hasattr(judge, "cached"):
                checker = judge.cached
            else:
                other = ModelPool(cache)
                checker = other.get("malformed_checker", "malformed_checker", checker_spec).backend
            try:
                checks = detect_malformed(
                    dialogues,
                    checker,
                    language_names=cfg.language_name_map(),
                    min_chars=cfg.malformed.langid_min_chars,
                    min_prob=cfg.malformed.langid_min_prob,
                    batch_size=cfg.labelling_batch_size,
                    progress=progress,
                )
            finally:
                if other is not None:
                    other.close()
        finally:
            judge.close()
        label_map = {lab.dialogue_id: lab for lab in labels}
        check_map = {c.dialogue_id: c for c in checks}
        clean = [d for d in dialogues if not check_map[d.id].malformed]
        _say(progress, f"{len(dialogues) - len(clean)} malformed dialogues kept in config `malformed`")

        # 5. statistics
        stats = language_statistics(clean)
        rates = issue_rates(clean, label_map)
        figures = work / "figures"
        figures.mkdir(exist_ok=True)
        figs = []
        if clean:
            figs = [
                issue_heatmap(clean, label_map, figures / "issue_rates_chatbot_language.png"),
                issue_type_heatmap(clean, label_map, figures / "issue_types_chatbot.png"),
            ]
        stats_doc = statistics_json(stats, rates)

        # 6. curation
        mixing = {
            d.id: why for d in dialogues if (why := mentions_language_mixing(label_map[d.id], d.language))
        }
        cur = curate(
            dialogues,
            label_map,
            malformed=check_map,
            language_mixing=mixing,
            config=CurationConfig(
                n_per_language=cfg.curation.n_per_language,
                seed=cfg.curation.seed,
                exclude_language_mixing=cfg.curation.exclude_language_mixing,
            ),
        )
        by_id = {d.id: d for d in dialogues}
        curated = [by_id[s.dialogue_id] for s in cur.selected]
        _say(progress, f"{len(curated)} dialogues curated for annotation")

        # 7. annotation round trip
        sheets = work / SHEETS_DIR
        export_sheets(curated, sheets, seeds=seed_map)
        ann = None
        ann_dir = cfg.path(cfg.annotation.dir)
        expected = {d.id: d.language for d in curated}
        project_labels = _labels_from_project_or_version(cfg, expected)
        if project_labels is not None:
            ann, source = project_labels
            if ann_dir is not None and _has_annotation_files(ann_dir):
                warnings.append(
                    f"annotation: the labels come from {source}; the files in {ann_dir} are not read"
                )
        elif ann_dir is not None and _has_annotation_files(ann_dir):
            ann = import_annotations(
                ann_dir,
                {d.id: d.language for d in curated},
                allow_partial=cfg.annotation.allow_partial,
                strict=cfg.annotation.strict,
            )
        agreement = agreement_tables(ann) if ann is not None else None

        # 8. publish directory
        out = work / "publish"
        out.mkdir(exist_ok=True)
        for stale in out.glob("*.jsonl"):
            stale.unlink()
        annotator = publish.judge_annotator(cfg.models.labeller)
        sel = {s.dialogue_id: {"stage": s.stage, "order": s.order, "target": s.target} for s in cur.selected}

        def rec(d: Dialogue, config: str, **kw: Any) -> dict[str, Any]:
            return publish.dialogue_record(d, config, seed_map, check=check_map.get(d.id), **kw)

        files = {
            "seeds": [publish.seed_record(s) for s in seeds],
            "dialogues": [rec(d, "dialogues") for d in clean],
            "auto_labels": [
                rec(d, "auto_labels", label=label_map[d.id], annotator=annotator) for d in dialogues
            ],
            "malformed": [rec(d, "malformed") for d in dialogues if check_map[d.id].malformed],
            "curated": [
                rec(d, "curated", label=label_map[d.id], annotator=annotator, curation=sel[d.id])
                for d in curated
            ],
        }
        if ann is not None:
            bench = {r["id"]: r for r in benchmark_records(curated, ann, seeds=seed_map)}
            files["benchmark"] = [
                rec(d, "benchmark", human_labels=bench[d.id]["labels"], curation=sel[d.id])
                for d in curated
                if d.id in bench
            ]
        for name, records in files.items():
            if records:
                publish.write_jsonl(out / f"{name}.jsonl", records)
        summary = {
            "seeds": len(seeds),
            "generation": gsum,
            "labels": label_summary(labels),
            "malformed": malformed_summary(checks),
            "curation": cur.to_dict(),
            "statistics": stats_doc,
            "annotation": None
            if ann is None
            else {
                "files": [str(p) for p in ann.files],
                "annotators": ann.annotators,
                "missing": ann.missing,
                "odd_cells": [c.to_dict() for c in ann.odd_cells],
                "agreement": agreement,
            },
            "rows": {k: len(v) for k, v in files.items()},
            "figures": [str(p) for p in figs],
            "timing_seconds": {k: round(v, 3) for k, v in gen.timing.items()},
        }
        meta = {
            "name": cfg.name,
            "fingerprint": cfg.generation_fingerprint(),
            "config": cfg.public_dict(),
            "models": {
                **cfg.models.model_dump(mode="json"),
                "malformed_checker": cfg.models.checker_spec() or "none (language identifier only)",
            },
            "template_hashes": template_hashes(),
            "summary": summary,
            "warnings": warnings,
            "markdown": {
                "generation": _generation_markdown(gsum),
                "statistics": [
                    "### Statistics (App. C.4, Table 2; Fig. 2)",
                    "",
                    *statistics_markdown(stats, rates),
                ],
                "malformed": _malformed_markdown(malformed_summary(checks)),
                "curation": [
                    "### Balanced curation for human annotation (§5.1)",
                    "",
                    *curation_markdown(cur, label_map),
                ],
                "annotation": _annotation_markdown(ann, agreement, agreement_markdown),
            },
        }
        (out / publish.PIPELINE_FILE).write_text(
            json.dumps(meta, indent=1, ensure_ascii=False, default=str), "utf-8"
        )
        project = _create_project_if_missing(cfg, out, work, progress)
        if project is not None:
            summary["annotation_project"] = project
        (work / "summary.json").write_text(
            json.dumps(summary, indent=1, ensure_ascii=False, default=str), "utf-8"
        )
        return PipelineResult(work, out, sheets, summary, ann is not None, warnings)
    finally:
        cache.close()


def run_on_executor(
    config: str | Path, ex: Any = None, *, progress: bool = True
) -> tuple[PipelineConfig, PipelineResult, dict[str, Any]]:
    """Load the pipeline config at ``config`` and run the pipeline with its model requests on
    ``ex``'s executor (an :class:`~harness.executors.ExecutorConfig`; ``None``: this process), on
    Ray in shards of :data:`SHARD_SIZE` requests. Returns the config, the result and the executor's
    description; when Ray pools ran, their per-worker stats also go to ``<work dir>/executor.json``."""
    import dataclasses

    from harness.executors import executor_scope

    cfg = PipelineConfig.load(config)
    if ex is not None and ex.distributed:
        ex = dataclasses.replace(ex, shard_size=SHARD_SIZE)
    with executor_scope(ex, seed=cfg.seed) as scope:
        res = run_pipeline(cfg, progress=progress)
        executor_info = scope.describe()
    if executor_info.get("pools"):
        (Path(res.work_dir) / "executor.json").write_text(
            json.dumps(executor_info, indent=2), encoding="utf-8"
        )
    return cfg, res, executor_info


def checkpoint_note(config: str | Path) -> str:
    """What a stopped pipeline kept, for the one line the CLI prints: its generation checkpoint
    (step and phase) and the request cache; nothing is registered until the pipeline finishes."""
    from dataset_builders.medal_pipeline.generate import STATE_FILE, ResumeError, load_state

    try:
        cfg = PipelineConfig.load(config)
        path = cfg.work / STATE_FILE
        state = load_state(path)
    except (OSError, ValueError, ResumeError):
        state, path = None, None
    where = (
        f"the generation checkpoint {path} (step {state.step}: {'generation finished' if state.done else state.phase})"
        if state is not None and path is not None
        else "no generation checkpoint yet"
    )
    return (
        f"{where} and every finished model request (the request cache) are kept; nothing registered — "
        "rerun the same command to resume"
    )


def _annotation_markdown(ann: Any, agreement: dict[str, Any] | None, render: Callable) -> list[str]:
    head = ["### Human annotation and inter-annotator agreement (§5.2, App. E.1, Tables 4–5)", ""]
    if ann is None:
        return [*head, "No human labels imported yet: config `benchmark` is absent.", ""]
    who = "; ".join(f"{lang}: {', '.join(names)}" for lang, names in sorted(ann.annotators.items()))
    return [
        *head,
        f"Annotators per language — {who}. Missing labels: {ann.missing}. Odd cells in the annotators' "
        f"files: {len(ann.odd_cells)} (listed in the build manifest).",
        "",
        *render(agreement),
        "",
    ]


def _labels_from_project_or_version(cfg: PipelineConfig, expected: dict[str, str]) -> tuple[Any, str] | None:
    """The labels of the config's annotation project or exported version (None: use the CSV files)."""
    from dataset_builders.medal_pipeline.annotation import project as annotation_project

    a = cfg.annotation
    if a.labels_from is not None:
        return annotation_project.from_version(a.labels_from, expected), a.labels_from
    if a.project is None:
        return None
    path = annotation_project.project_file(a.project, cfg.path(a.project_dir))
    if not path.is_file():
        return None
    ann = annotation_project.from_project(path, expected, allow_partial=a.allow_partial)
    return (ann, f"annotation project {a.project} ({path})") if ann is not None else None


def _create_project_if_missing(
    cfg: PipelineConfig, publish_dir: Path, work: Path, progress: bool
) -> dict[str, Any] | None:
    """Create the config's annotation project over the curated dialogues when it does not exist yet."""
    from dataset_builders.medal_pipeline.annotation import project as annotation_project

    a = cfg.annotation
    if a.project is None:
        return None
    path = annotation_project.project_file(a.project, cfg.path(a.project_dir))
    if path.is_file():
        return {"name": a.project, "path": str(path), "created": False}
    if not (publish_dir / f"{annotation_project.CONFIG}.jsonl").is_file():
        return None  # nothing curated to annotate
    made = annotation_project.create_project(
        a.project,
        cfg.path(a.project_dir),
        publish_dir,
        work,
        annotators=list(a.annotators),
        per_item=a.per_item,
        seed=cfg.curation.seed,
        pipeline_name=cfg.name,
    )
    n = made.n_items()
    made.close()
    where = f" --dir {a.project_dir}" if a.project_dir else ""
    _say(
        progress,
        f"created annotation project {a.project} ({n} curated dialogues, {a.per_item} annotator(s) each): "
        f"`harness annotate serve {a.project}{where} --new-tokens` prints the annotators' addresses",
    )
    return {"name": a.project, "path": str(path), "created": True, "items": n}


def _has_annotation_files(root: Path) -> bool:
    return root.is_dir() and any(
        p.suffix.lower() in (".csv", ".tsv", ".jsonl")
        for sub in root.iterdir()
        if sub.is_dir()
        for p in sub.iterdir()
    )


def _generation_markdown(g: dict[str, Any]) -> list[str]:
    rows = [
        ("dialogues started", g["dialogues"]),
        ("dialogues with turns", g["dialogues_with_turns"]),
        ("average turns (utterances)", g["avg_turns"]),
        ("first user turn pass rate (user judge)", g["first_turn_pass_rate"]),
        ("later user turn pass rate", g["user_turn_pass_rate"]),
        ("seed contexts whose first turn failed every attempt", g["first_turn_rejected"]),
        ("dialogues terminated: a user turn failed every attempt", g["user_turn_rejected"]),
        ("dialogues ended by END_OF_DIALOGUE", g["end_of_dialogue"]),
        (
            "user-judge parse failures (a reply neither Yes nor No; deciding by log-probs: no label log-prob)",
            g["user_judge_parse_failures"],
        ),
        (
            "empty user messages / chatbot responses",
            f"{g['empty_user_text']} / {g['empty_chatbot_response']}",
        ),
        ("requests (incl. cache hits)", g["requests"]),
    ]
    out = ["### Generation", "", "| | |", "|---|---:|", *(f"| {k} | {v} |" for k, v in rows), ""]
    out += ["End of generation per dialogue: " + ", ".join(f"{k} {v}" for k, v in g["statuses"].items()), ""]
    return out


def _malformed_markdown(m: dict[str, Any]) -> list[str]:
    return [
        "### Malformed dialogues (App. C.3)",
        "",
        f"{m.get('malformed', 0)} of {m.get('n', 0)} dialogues flagged "
        f"({100 * (m.get('malformed_share') or 0):.2f}%); reasons: {m.get('reasons', {})}; "
        f"sources: {m.get('sources', {})}; LLM-check parse failures: {m.get('parse_failures', 0)}. "
        "They are kept in config `malformed` (never deleted) and excluded from `dialogues` and curation.",
        "",
    ]
