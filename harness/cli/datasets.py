"""``harness datasets build | ls | show | verify | publish | diff | qa``: the versioned dataset registry on the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from harness.executors import ExecutorConfig

from harness.cli.console import (
    ExecutorOpt,
    GpusOpt,
    WorkersOpt,
    command_group,
    console,
    error_message,
    executor_config,
    executor_summary,
    fail,
    frame_table,
    judge_arg,
    stopped,
    styled,
    warn,
)

datasets_app = command_group(
    help="Versioned benchmark datasets: build into the local registry, list, show, diff, publish to the Hub.",
    no_args_is_help=True,
)


RegistryOpt = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="Dataset registry directory (default $DIALEVAL_REGISTRY or $DIALEVAL_HOME/registry)",
    ),
]


@datasets_app.command("build")
def build(
    name: Annotated[
        str, typer.Argument(help="Builder name (harness ls datasets), or 'import' with --mapping")
    ],
    source: Annotated[
        str | None, typer.Option(help="Raw files (a directory; default: the public source)")
    ] = None,
    version: Annotated[
        str | None, typer.Option(help="Version to register, X.Y.Z (default 1.0.0 for a new dataset)")
    ] = None,
    bump: Annotated[str | None, typer.Option(help="Register the next major|minor|patch version")] = None,
    dataset_name: Annotated[
        str | None, typer.Option("--name", help="Registry name (default: the builder's)")
    ] = None,
    mapping: Annotated[
        str | None, typer.Option(help="Column mapping for 'import' (YAML path or shipped name)")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Build into this directory instead of the registry")
    ] = None,
    language: Annotated[
        list[str] | None, typer.Option("--language", "-l", help="Only these languages")
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip rows that break the file (counted, in the manifest)")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail on the first odd cell instead of handling and listing it")
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Pipeline config (YAML) of a generating builder: 'medal' runs the MEDAL pipeline "
            "(seeds → dialogues → labels → curation → annotations) and builds from its output",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
    registry: RegistryOpt = None,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusOpt = 0.0,
) -> None:
    """Build a dataset and register it as an immutable version (or write it to --output)."""
    from harness.data.builders import get_builder
    from harness.data.cells import summary_of
    from harness.data.registry import DatasetRegistry, DatasetRegistryError, check_name, check_writable
    from harness.data.schema import DataValidationError, SchemaError
    from harness.interrupt import Interrupted

    kwargs: dict[str, str] = {"mapping": mapping} if mapping is not None else {}
    if name == "import" and mapping is None:
        fail(
            "'import' needs --mapping NAME|FILE.yaml (shipped: comperdial, dstc11-track4; see docs/importing.md)"
        )
    elif name != "import" and mapping is not None:
        fail("--mapping only applies to the 'import' builder")
    if strict and skip_invalid:
        fail("--strict and --skip-invalid contradict each other: give one of them")
    opts: dict[str, bool] = {"skip_invalid": skip_invalid, **({"strict": True} if strict else {})}
    ex = executor_config(executor, workers, gpus_per_worker)
    if ex.distributed and config is None:
        fail(
            "--executor ray runs a generation pipeline's model requests: it needs --config (the MEDAL pipeline)"
        )
    if config is not None:
        if name != "medal":
            fail("--config runs a generation pipeline; only the 'medal' builder has one")
        if source is not None:
            fail("--config builds from the pipeline's own output; drop --source")
        source, dataset_name = _run_medal_pipeline(config, quiet, dataset_name, ex)
    try:
        builder = get_builder(name, **kwargs)
        langs = builder.normalize_languages(language or None)
        if output is not None:
            if version or bump:
                fail("--version/--bump register a version; they cannot be combined with --output")
            check_writable(output, registry)
            res = builder.build(source, output, languages=langs, show_progress=not quiet, **opts)
            where = str(res.output_dir)
        else:
            reg = DatasetRegistry(registry)
            reg_name = check_name(builder.name if dataset_name is None else dataset_name)
            if version and bump:
                fail("give --version or --bump, not both")
            ver = version or (reg.next_version(reg_name, bump) if bump else "1.0.0")
            holder: dict[str, Any] = {}

            def write(staging: Path, release: dict[str, Any]) -> None:
                holder["res"] = builder.build(
                    source,
                    staging,
                    languages=langs,
                    release=release,
                    show_progress=not quiet,
                    **opts,
                )

            registered = reg.register(reg_name, ver, write)
            res = holder["res"]
            where = f"{registered.ref} → {registered.path}"
    except (
        DataValidationError,
        SchemaError,
        FileNotFoundError,
        FileExistsError,
        ValueError,
        KeyError,
        DatasetRegistryError,
    ) as e:
        fail(error_message(e))
        return
    except Interrupted as e:  # temporary folders are removed on the way out
        kept = "no version registered" if output is None else f"{output} is left as it was"
        stopped(f"{e} while building: {kept}; rerun the same command to build it", e.exit_status)
        return
    t = Table(title=where)
    t.add_column("config")
    t.add_column("rows", justify="right")
    for c, n in res.configs.items():
        t.add_row(c, str(n))
    console.print(t)
    skipped = res.manifest.get("skipped", {}).get("count", 0)
    if skip_invalid or skipped:
        warn(f"{skipped} (listed in build_manifest.json)", label="skipped source rows:")
    if odd := summary_of(res.manifest.get("odd_cells") or {}):
        warn(odd, label="odd source cells:")
    for w in res.warnings:
        warn(w)
    console.print(f"fingerprint {res.fingerprint}")


def _run_medal_pipeline(
    config: Path, quiet: bool, dataset_name: str | None, ex: ExecutorConfig | None = None
) -> tuple[str, str | None]:
    """Run the MEDAL pipeline (its model requests on ``ex``'s executor); return (publish directory,
    registry name). On Ray the per-worker stats go to ``<work dir>/executor.json``."""
    from dataset_builders.medal_pipeline.generate import ResumeError
    from dataset_builders.medal_pipeline.pipeline import checkpoint_note, run_on_executor
    from harness.data.schema import DataValidationError
    from harness.interrupt import Interrupted
    from harness.spec import SpecError
    from harness.types import BackendError

    try:
        cfg, res, executor_info = run_on_executor(config, ex, progress=not quiet)
    except (ValueError, FileNotFoundError, DataValidationError, ResumeError, SpecError, BackendError) as e:
        fail(f"{config}: {e}")
        raise AssertionError from e  # unreachable: _fail exits
    except Interrupted as e:
        stopped(f"{e}: {checkpoint_note(config)}", e.exit_status)
        raise AssertionError from e  # unreachable: stopped exits
    for w in res.warnings:
        warn(w)
    executor_summary(executor_info)
    s = res.summary
    console.print(
        f"MEDAL pipeline: {s['seeds']} seed contexts, {s['generation']['dialogues_with_turns']} dialogues, "
        f"{s['malformed'].get('malformed', 0)} malformed, {len(s['curation']['selected'])} curated "
        f"(work dir {res.work_dir})"
    )
    if not s["curation"]["selected"]:
        warn(
            "no dialogue could be curated (see the exclusions in the card: unlabelled, "
            "malformed ...), so there is nothing to annotate"
        )
    elif not res.benchmark:
        console.print(
            f"annotation sheets: {res.sheets_dir} (GUIDELINES.md inside). Put the filled files in "
            f"{cfg.path(cfg.annotation.dir)}/<language>/<annotator>.csv|.jsonl and rerun this command to "
            "import them and publish config `benchmark`."
        )
    return str(res.publish_dir), dataset_name or cfg.name


@datasets_app.command("ls")
def ls(registry: RegistryOpt = None) -> None:
    """List registered datasets and their versions."""
    from harness.data.registry import DatasetRegistry

    reg = DatasetRegistry(registry)
    t = Table(title=f"dataset registry {reg.root}")
    for col in ("dataset", "versions", "latest", "builder", "configs (rows)", "created"):
        t.add_column(col)
    for name in reg.names():
        latest = reg.get(name)
        man = latest.manifest
        configs = ", ".join(f"{c} ({e['rows']})" for c, e in man.get("configs", {}).items())
        builder = f"{man['builder']['name']} {man['builder']['version']}"
        t.add_row(
            name, " ".join(reg.versions(name)), latest.version, builder, configs, man.get("created_at", "")
        )
    console.print(t)
    if not reg.names():
        console.print("no datasets registered yet: harness datasets build NAME --source DIR")


@datasets_app.command("verify")
def verify(
    ref: Annotated[str, typer.Argument(help="NAME@X.Y.Z (or NAME: the latest version)")],
    registry: RegistryOpt = None,
) -> None:
    """Check every file of a registered version against the sha256 recorded when it was registered
    (SHA256SUMS); exit 1 and list the files when any differs, is missing or was added."""
    from harness.data.registry import CHECKSUMS, DatasetRegistry, DatasetRegistryError, verify_version

    try:
        rv = DatasetRegistry(registry).resolve(ref, verify=False)
    except DatasetRegistryError as e:
        fail(error_message(e))
        return
    report = verify_version(rv)
    if not report.recorded:
        warn(
            f"{rv.ref} has no {CHECKSUMS} (registered before checksums were "
            "recorded): nothing to verify against"
        )
        return
    for problem in report.problems():
        console.print(f"  {problem}", highlight=False)
    if not report.ok:
        fail(f"{rv.ref}: {len(report.problems())} file(s) do not match {rv.path / CHECKSUMS}", code=1)
    console.print(f"{rv.ref} ({str(rv.path)}): all {report.checked} files match {CHECKSUMS}")


@datasets_app.command("show")
def show(
    ref: Annotated[
        str, typer.Argument(help="NAME[@X.Y.Z] (default: the latest version) or a dataset directory")
    ],
    agreement: Annotated[bool, typer.Option(help="Compute inter-annotator agreement statistics")] = True,
    by: Annotated[
        list[str] | None, typer.Option("--by", help="Agreement per group too: system, language")
    ] = None,
    registry: RegistryOpt = None,
) -> None:
    """Manifest, configs, dimensions, warnings and agreement statistics of one version."""
    from harness.data.registry import DatasetRegistry, DatasetRegistryError, verify_if_registered
    from harness.report.datasets import agreement_tables, paper_comparisons

    try:
        path = Path(ref) if Path(ref).is_dir() else DatasetRegistry(registry).resolve(ref).path
        verify_if_registered(path)
        man = json.loads((path / "build_manifest.json").read_text(encoding="utf-8"))
    except (DatasetRegistryError, OSError, ValueError) as e:
        fail(str(e))
        return
    rel = man.get("release") or {}
    console.print(styled(f"{rel.get('name', path.name)}@{rel.get('version', '-')}", "bold", f" {path}"))
    console.print(
        f"builder {man['builder']['name']} {man['builder']['version']} · created {man.get('created_at')} · "
        f"fingerprint {man.get('fingerprint', '')[:16]} · options {json.dumps(man.get('options', {}))}"
    )
    t = Table(title="configs")
    for col in ("config", "level", "rows", "items", "languages"):
        t.add_column(col)
    for c, entry in man["configs"].items():
        t.add_row(
            c,
            entry["level"],
            str(entry["rows"]),
            str(entry.get("instances")),
            " ".join(entry.get("languages", [])),
        )
    console.print(t)
    t = Table(title="inputs")
    for col in ("config", "file", "source", "sha256"):
        t.add_column(col)
    for i in man["inputs"]:
        t.add_row(i["config"], i["file"], i["source"], i["sha256"][:16])
    console.print(t)
    if man.get("dimensions"):
        t = Table(title="dimensions")
        for col in ("dimension", "scale", "range", "definition"):
            t.add_column(col)
        for d in man["dimensions"]:
            t.add_row(d["name"], d["scale"], f"{d['min']:g}–{d['max']:g}", d["definition"])
        console.print(t)
    for c, entry in man["configs"].items():
        if "counts" in entry:
            console.print(Text.assemble((f"{c} counts", "bold"), ": " + json.dumps(entry["counts"])))
    skipped = man.get("skipped", {"count": 0})
    console.print(f"skipped source rows: {skipped['count']}")
    for r in skipped.get("rows", [])[:20]:
        console.print(f"  - {str(r['file'])} row {r['row']}, {str(r['field'])}: {r['problem']}")
    from harness.data.cells import summary_of

    console.print(f"odd source cells: {summary_of(man.get('odd_cells') or {}) or 'none'}")
    for w in man.get("warnings", []):
        warn(w)
    if not agreement:
        return
    for title, table in agreement_tables(path, man, by=by or []):
        console.print(frame_table(title, table))
    for title, table in paper_comparisons(path, man):
        console.print(frame_table(title, table))


@datasets_app.command("diff")
def diff(
    a: Annotated[str, typer.Argument(help="NAME@X.Y.Z (or a dataset directory)")],
    b: Annotated[str, typer.Argument(help="NAME@X.Y.Z (or a dataset directory)")],
    registry: RegistryOpt = None,
) -> None:
    """What changed between two versions: builder, inputs, configs, rows (added/removed/changed ids)."""
    from harness.data.registry import DatasetRegistry, DatasetRegistryError, verify_if_registered
    from harness.report.datasets import diff_versions

    try:
        reg = DatasetRegistry(registry)
        pa, pb = (Path(x) if Path(x).is_dir() else reg.resolve(x).path for x in (a, b))
        for p in (pa, pb):
            verify_if_registered(p)
    except DatasetRegistryError as e:
        fail(str(e))
        return
    d = diff_versions(pa, pb)
    console.print(styled(f"{a} → {b}", "bold"))
    for line in d["summary"]:
        console.print(f"  {line}")
    t = Table(title="configs")
    for col in ("config", "rows a", "rows b", "added ids", "removed ids", "changed rows", "changed columns"):
        t.add_column(col)
    for c, entry in d["configs"].items():
        t.add_row(
            c,
            str(entry["rows_a"]),
            str(entry["rows_b"]),
            str(entry["added"]),
            str(entry["removed"]),
            str(entry["changed"]),
            ", ".join(f"{k} {n}" for k, n in entry["changed_columns"].items()),
        )
    console.print(t)
    if d["identical"]:
        console.print("the two versions hold identical data")


@datasets_app.command("publish")
def publish(
    ref: Annotated[str, typer.Argument(help="NAME@X.Y.Z of a registered version")],
    repo: Annotated[str, typer.Option(help="Hub dataset repo id, namespace/name")],
    private: Annotated[bool, typer.Option(help="Create the repo as private")] = False,
    endpoint: Annotated[
        str | None, typer.Option(help="Hub endpoint (default $HF_ENDPOINT or huggingface.co)")
    ] = None,
    registry: RegistryOpt = None,
) -> None:
    """Upload a registered version to the Hub in one commit and tag it vX.Y.Z (token from $HF_TOKEN)."""
    from harness.data.hub import PublishError, publish_dataset
    from harness.data.registry import DatasetRegistry, DatasetRegistryError

    try:
        rv = DatasetRegistry(registry).resolve(ref)
        res = publish_dataset(rv.path, repo, rv.version, private=private, endpoint=endpoint)
    except (DatasetRegistryError, PublishError) as e:
        fail(str(e))
        return
    console.print(
        f"published {rv.ref} to {res.repo_id} at {res.tag} (commit {res.commit_sha[:12]}), {len(res.files)} files"
    )
    console.print(f'load it with: datasets.load_dataset("{res.repo_id}", "<config>", revision="{res.tag}")')


@datasets_app.command("qa")
def qa(
    ref: Annotated[
        str, typer.Argument(help="NAME@X.Y.Z of a registered translated dataset (or a dataset directory)")
    ],
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            "-j",
            help="Adequacy judge: an LLM gets the App. A prompt (1–5); any kind works",
            callback=judge_arg,
        ),
    ] = None,
    encoder: Annotated[
        str | None, typer.Option(help="Embedding judge for source–translation similarity ('none' to skip)")
    ] = None,
    translator: Annotated[
        str | None, typer.Option(help="LLM spec that back-translates into the source language")
    ] = None,
    bt_column: Annotated[
        str | None, typer.Option(help="Column with back-translations (one per utterance)")
    ] = None,
    comet: Annotated[bool, typer.Option("--comet", help="CometKiwi QE (optional extra [comet])")] = False,
    comet_model: Annotated[
        str, typer.Option(help="CometKiwi model id, .ckpt or directory")
    ] = "Unbabel/wmt22-cometkiwi-da",
    sample: Annotated[int, typer.Option(help="Source utterances per config (paper: 100); 0 = all")] = 100,
    seed: Annotated[int, typer.Option(help="Sampling and judge seed")] = 0,
    config: Annotated[list[str] | None, typer.Option("--config", help="Only these configs")] = None,
    language: Annotated[
        list[str] | None, typer.Option("--language", "-l", help="Only these target languages")
    ] = None,
    source_language: Annotated[str, typer.Option(help="Language the others were translated from")] = "en",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Directory for qa.json + segments.parquet")
    ] = None,
    version: Annotated[
        str | None, typer.Option(help="Version of the flagged copy (default: next minor)")
    ] = None,
    dataset_output: Annotated[
        Path | None, typer.Option(help="Write the flagged copy here instead of the registry")
    ] = None,
    no_register: Annotated[
        bool, typer.Option("--no-register", help="Only the report; no flagged version")
    ] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b")] = 32,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not read or write the request cache")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
    registry: RegistryOpt = None,
) -> None:
    """Translation QA (xDial-Eval §3.2): Table 2 per language; flags go into a new dataset version."""
    from harness.data.registry import DatasetRegistryError, check_writable
    from harness.languages import normalize_languages
    from harness.qa.run import DEFAULT_ENCODER, QAConfig, run_qa
    from harness.report.meta import QA_HEADERS, qa_rows
    from harness.spec import SpecError
    from harness.types import BackendError

    enc = None if (encoder or "").lower() == "none" else (encoder or DEFAULT_ENCODER)
    try:
        for flag, path in (("--output", output), ("--dataset-output", dataset_output)):
            if path is not None:
                check_writable(path, registry, flag=flag)  # never into a registered version
        cfg = QAConfig(
            ref=ref,
            judge=judge,
            encoder=enc,
            encoder_explicit=encoder is not None,
            translator=translator,
            bt_column=bt_column,
            comet=comet,
            comet_model=comet_model,
            sample=sample,
            seed=seed,
            source_language=source_language,
            configs=config or None,
            languages=normalize_languages(language),
            batch_size=batch_size,
            output_dir=output,
            register=not no_register,
            version=version,
            dataset_output=dataset_output,
            registry=registry,
            use_cache=not no_cache,
            show_progress=not quiet,
        )
        res = run_qa(cfg)
    except (
        DatasetRegistryError,
        ValueError,
        KeyError,
        FileNotFoundError,
        FileExistsError,
        RuntimeError,
        SpecError,
        BackendError,
    ) as e:
        fail(error_message(e))
        return
    t = Table(title=f"translation QA of {res.qa['dataset']['ref']} (xDial-Eval Table 2 style)")
    for h in QA_HEADERS:
        t.add_column(h, justify="left" if h == "lang" else "right")
    for row in qa_rows(res.qa):
        t.add_row(*row)
    console.print(t)
    for k, v in res.qa["methods"].items():
        console.print(
            f"{k}: {v if isinstance(v, str) else v.get('spec') or v.get('column') or v.get('model') or 'ran'}"
        )
    console.print("flags: " + ", ".join(f"{k} {v}" for k, v in sorted(res.qa["flags"].items())))
    for w in res.warnings:
        warn(w)
    if res.new_version:
        console.print(
            f"flagged copy: {res.new_version} (columns qa_flagged, translation_qa; the checked version is unchanged)"
        )
    console.print(f"wrote {str(res.output_dir / 'qa.json')} and segments.parquet")
