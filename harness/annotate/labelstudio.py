"""The Label Studio route of an annotation project, for teams that already run Label Studio.

* :func:`labeling_config` — the project's form as a Label Studio labeling config (XML): the
  transcript as one ``<HyperText>`` block (roles, turn numbers, the rated response highlighted,
  persona / scene / reference when the item has them, right to left where the language is), then
  one control per field: ``<Choices>`` for binary issues and Likert scales (one ``<Choice>`` per
  scale point, its wording shown, its number as the choice's ``alias``, so exports carry the
  number), ``<Number>`` for continuous scales, and an optional ``<TextArea>`` that flags the item;
* :func:`tasks` / :func:`write_export` — the project's items as Label Studio tasks (JSON), blind:
  the data holds the transcript, the item id and the language, never a system, model or judge name;
* :func:`read_ls_export` — a Label Studio JSON export (Export > JSON) back as submissions: each
  annotation's ``completed_by`` (the Label Studio user's email, else its numeric id) is the
  annotator; a cancelled (skipped) annotation is a skip. A cell the form cannot take — an unknown
  control, a choice that is no point of the scale, a number outside it, a missing field — stops the
  read with one error naming the file, the task, the annotation and the field;
* :func:`import_ls` — those submissions into the project store, idempotently: each submission's id
  is derived from the task, the annotation and its labels, so importing the same export again adds
  nothing. What the store refuses (a Label Studio user who is not one of the project's annotators,
  an item already submitted with other labels — undo it in the project first) is reported with the
  store's reason and the rest still comes in.

See docs/annotation.md (section "Label Studio").
"""

from __future__ import annotations

import html
import json
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.annotate.form import Field, Form
from harness.annotate.store import AnnotationError, ItemView, Project, Submission

#: the object tag that shows the transcript and the control that flags an item; no field may use them
TRANSCRIPT = "transcript"
FLAG = "flag"
#: submission ids of imported annotations: uuid5 in this namespace of the task, annotation and labels
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://labelstud.io/dialeval-harness")


class LabelStudioExportError(ValueError):
    """A Label Studio export that cannot be read into the project's form (one sentence, naming
    the file, the task, the annotation and the field)."""


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_ls` did: submissions imported, already there (the same export or the
    same labels imported before), and refused by the project store, with the store's reasons."""

    imported: int
    duplicates: int
    rejected: int
    reasons: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        return {
            "imported": self.imported,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "reasons": list(self.reasons),
        }


# --------------------------------------------------------------------------------------------------
# the labeling config


def _num(value: float) -> str:
    return f"{value:g}"


def _choice_value(f: Field, value: float, wording: str) -> str:
    """What a choice shows: the wording of a binary issue's toggle, ``"3 — fair"`` of a scale point."""
    if f.kind == "binary":
        return wording or _num(value)
    return f"{_num(value)} — {wording}" if wording and wording != _num(value) else _num(value)


def _points(f: Field) -> tuple[tuple[float, str], ...]:
    """The field's scale points; a Likert field without wordings gets its integers."""
    if f.points:
        return f.points
    if f.kind == "binary":
        return ((0.0, "no"), (1.0, "yes"))
    return tuple((float(v), "") for v in range(int(f.min), int(f.max) + 1))


def labeling_config(form: Form) -> str:
    """The form as a Label Studio labeling config (XML); every field is required."""
    names = [f.dimension for f in form.fields]
    clash = sorted({TRANSCRIPT, FLAG} & set(names))
    if clash:
        raise ValueError(
            f"dimension {clash[0]!r} has the name of the Label Studio config's "
            f"{'transcript' if clash[0] == TRANSCRIPT else 'flag comment'}; rename the dimension"
        )
    root = ET.Element("View")
    what = "task" if form.task is None else f"task {form.task}"
    ET.SubElement(root, "Header", value=f"{form.dataset} — {what}", size="4")
    ET.SubElement(root, "HyperText", name=TRANSCRIPT, value=f"${TRANSCRIPT}", inline="true")
    for f in form.fields:
        box = ET.SubElement(root, "View", style="margin-top: 1em")
        ET.SubElement(box, "Header", value=f.dimension, size="5")
        if f.definition:
            ET.SubElement(box, "Header", value=f.definition, size="6", underline="false")
        if f.kind == "continuous":
            ET.SubElement(
                box,
                "Number",
                name=f.dimension,
                toName=TRANSCRIPT,
                min=_num(f.min),
                max=_num(f.max),
                step=_num((f.max - f.min) / 100),
                required="true",
            )
            continue
        choices = ET.SubElement(
            box,
            "Choices",
            name=f.dimension,
            toName=TRANSCRIPT,
            choice="single-radio",
            showInline="true",
            required="true",
            requiredMessage=f"Choose a value of {f.dimension}",
        )
        for value, wording in _points(f):
            ET.SubElement(choices, "Choice", value=_choice_value(f, value, wording), alias=_num(value))
    ET.SubElement(root, "Header", value="Flag this item (optional comment)", size="6")
    ET.SubElement(root, "TextArea", name=FLAG, toName=TRANSCRIPT, rows="2", maxSubmissions="1")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


# --------------------------------------------------------------------------------------------------
# tasks


def _text(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def _turn_html(role: object, turn: object, text: object) -> str:
    head = f"{html.escape(str(role))} · turn {html.escape(str(turn))}"
    return f'<p style="margin:.3em 0"><b>{head}</b><br>{_text(str(text))}</p>'


def transcript_html(view: ItemView) -> str:
    """One item's transcript as the HTML of the config's ``<HyperText>`` (every text escaped)."""
    parts = [f'<div dir="{view.direction}" lang="{html.escape(view.language)}">']
    for label, text in (("Persona", view.persona), ("Scene", view.scene)):
        if text:
            parts.append(f'<p style="color:#555"><i>{label}:</i> {_text(text)}</p>')
    rows = view.turns if view.level == "dialogue" and view.turns is not None else view.context
    for row in rows:
        parts.append(_turn_html(row.get("role", ""), row.get("turn", ""), row.get("text", "")))
    if view.level == "turn" and view.response is not None:
        role = html.escape(view.response_role or "assistant")
        parts.append(
            '<div style="background:#fff3bf;border-left:4px solid #f59f00;padding:.3em .6em">'
            f"<b>{role} · the response to rate</b><br>{_text(view.response)}</div>"
        )
    if view.reference:
        parts.append(f'<p style="color:#555"><i>Reference response:</i> {_text(view.reference)}</p>')
    parts.append("</div>")
    return "".join(parts)


def task_for(view: ItemView) -> dict[str, object]:
    """One item as a Label Studio task: the transcript and the ids, nothing that names a system."""
    return {
        "data": {
            "item_id": view.item_id,
            "language": view.language,
            TRANSCRIPT: transcript_html(view),
        }
    }


def _item_views(project: Project) -> Iterator[ItemView]:
    """Every item of the project, as an annotator would see it (the project's item order)."""
    records = list(project.records())
    for position, (key, _config, rec) in enumerate(records, 1):
        language = str(rec.get("language") or "")
        yield ItemView.from_record(
            key, language, rec, project.form.level, position=position, total=len(records)
        )


def tasks(project: Project) -> list[dict[str, object]]:
    """Every item of the project as a Label Studio task (JSON-ready)."""
    return [task_for(view) for view in _item_views(project)]


def instructions_html(form: Form) -> str:
    """The form's guideline as HTML, for the Label Studio project's Instructions setting."""
    return MarkdownIt("commonmark", {"html": False}).render(form.guideline)


def write_export(project: Project, directory: Path) -> tuple[Path, Path]:
    """Write ``tasks.json`` and ``config.xml`` (and ``instructions.html``, the guideline) into
    ``directory``; return the paths of the first two."""
    directory.mkdir(parents=True, exist_ok=True)
    tasks_path, config_path = directory / "tasks.json", directory / "config.xml"
    tasks_path.write_text(json.dumps(tasks(project), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    config_path.write_text(labeling_config(project.form), encoding="utf-8")
    (directory / "instructions.html").write_text(instructions_html(project.form), encoding="utf-8")
    return tasks_path, config_path


# --------------------------------------------------------------------------------------------------
# reading an export


class _User(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | None = None
    email: str | None = None


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")
    from_name: str
    type: str
    value: dict[str, object]


class _Annotation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | str
    completed_by: int | str | _User | None = None
    result: list[_Result] = []
    was_cancelled: bool = False


class _Task(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | str
    data: dict[str, object]
    annotations: list[_Annotation] = []


def _annotator(ann: _Annotation) -> str | None:
    who = ann.completed_by
    if isinstance(who, _User):
        return who.email or (str(who.id) if who.id is not None else None)
    return None if who is None else str(who)


def _loc(loc: Sequence[int | str]) -> str:
    return ".".join(str(p) for p in loc) or "(the task)"


class _Where:
    """Where a cell is, for error messages."""

    def __init__(self, path: Path, task: object, annotation: object = None, annotator: str | None = None):
        self.path, self.task, self.annotation, self.annotator = path, task, annotation, annotator

    def fail(self, field_name: str, problem: str) -> LabelStudioExportError:
        where = f"{self.path}: task {self.task}"
        if self.annotation is not None:
            where += f", annotation {self.annotation}"
            if self.annotator:
                where += f" by {self.annotator}"
        return LabelStudioExportError(f"{where}, field {field_name!r}: {problem}")


def _choice_points(f: Field) -> dict[str, float]:
    """Every string a choice of ``f`` can come back as: the alias (its number) and the shown value."""
    out: dict[str, float] = {}
    for value, wording in _points(f):
        out[_num(value)] = value
        out[_choice_value(f, value, wording)] = value
    return out


def _value(f: Field, res: _Result, where: _Where) -> float:
    """The number a result of field ``f`` carries (choices, rating or number), on ``f``'s scale."""
    fix = "correct it in Label Studio and export again"
    if res.type == "choices":
        picked = res.value.get("choices")
        if not isinstance(picked, list) or len(picked) != 1:
            raise where.fail(f.dimension, f"expected exactly one choice, found {picked!r}; {fix}")
        raw = picked[0]
        known = _choice_points(f)
        if isinstance(raw, str) and raw in known:
            value = known[raw]
        else:
            try:
                value = float(str(raw))
            except ValueError:
                shown = ", ".join(repr(k) for k in known)
                raise where.fail(
                    f.dimension, f"{raw!r} is no point of the scale (points: {shown}); {fix}"
                ) from None
    elif res.type in ("rating", "number"):
        raw = res.value.get(res.type)
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise where.fail(f.dimension, f"expected a number as {res.type}, found {raw!r}; {fix}")
        value = float(raw)
    else:
        raise where.fail(
            f.dimension,
            f"a {res.type!r} result cannot hold a {f.kind} label (use the exported config); {fix}",
        )
    problem = f.problem(value)
    if problem:
        raise where.fail(f.dimension, f"{problem}; {fix}")
    return value


def _submission(task: _Task, ann: _Annotation, item_id: str, form: Form, where: _Where) -> Submission:
    labels: dict[str, float] = {}
    flag: str | None = None
    for res in ann.result:
        if res.from_name == FLAG:
            text = res.value.get("text")
            lines = text if isinstance(text, list) else [text]
            flag = "\n".join(str(t) for t in lines if t) or None
            continue
        try:
            f = form.field(res.from_name)
        except KeyError:
            known = ", ".join(x.dimension for x in form.fields)
            raise where.fail(res.from_name, f"not a field of the form (its fields: {known})") from None
        if f.dimension in labels:
            raise where.fail(f.dimension, "labelled twice in one annotation")
        labels[f.dimension] = _value(f, res, where)
    if ann.was_cancelled:
        labels = {}
    else:
        missing = [f.dimension for f in form.fields if f.dimension not in labels]
        if missing and flag is None:
            raise where.fail(
                missing[0],
                "no label (every field of the form is required unless the task is skipped or flagged)",
            )
    digest = json.dumps(
        [task.id, ann.id, sorted(labels.items()), ann.was_cancelled, flag], ensure_ascii=False
    )
    return Submission(
        item_id=item_id,
        submission_id=str(uuid.uuid5(_NAMESPACE, digest)),
        labels=labels,
        skip=ann.was_cancelled,
        flag=flag,
    )


def _tasks_of(path: Path) -> list[Mapping[str, object]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise LabelStudioExportError(
            f"{path}: cannot read the Label Studio export ({err.strerror})"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LabelStudioExportError(
            f"{path}: not a Label Studio JSON export ({err}); export the project with Export > JSON"
        ) from None
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise LabelStudioExportError(
            f"{path}: not a Label Studio JSON export (expected a list of tasks); export the project with "
            "Export > JSON (JSON-MIN, CSV and the other formats drop the annotators)"
        )
    return raw


def read_ls_export(path: Path, form: Form) -> list[tuple[str, Submission]]:
    """Every annotation of a Label Studio JSON export as ``(annotator, submission)``, in file order.

    Raises :class:`LabelStudioExportError` at the first cell the form cannot take."""
    out: list[tuple[str, Submission]] = []
    for raw in _tasks_of(path):
        task_id = raw.get("id", "(no id)")
        try:
            task = _Task.model_validate(raw)
        except ValidationError as err:
            first = err.errors()[0]
            raise _Where(path, task_id).fail(_loc(first["loc"]), first["msg"]) from None
        item_id = task.data.get("item_id")
        if not isinstance(item_id, str) or not item_id:
            raise _Where(path, task.id).fail(
                "data.item_id", "missing: the task was not made by `harness annotate export-ls`"
            )
        for ann in task.annotations:
            annotator = _annotator(ann)
            where = _Where(path, task.id, ann.id, annotator)
            if annotator is None:
                raise where.fail("completed_by", "no annotator (export with Export > JSON, which keeps it)")
            out.append((annotator, _submission(task, ann, item_id, form, where)))
    return out


# --------------------------------------------------------------------------------------------------
# importing


def import_ls(project: Project, path: Path) -> ImportReport:
    """Read a Label Studio JSON export (:func:`read_ls_export`) into the project store.

    Each submission goes through :meth:`Project.submit`, which validates it and commits it; one the
    store refuses (an annotator who is not one of the project's, an item not in their queue) is
    counted as rejected with the store's reason, the others still come in. A submission already in
    the store is counted as a duplicate and changes nothing."""
    imported = duplicates = 0
    reasons: list[str] = []
    for annotator, sub in read_ls_export(path, project.form):
        try:
            before = project.progress(annotator).done
            after = project.submit(annotator, sub).done
        except AnnotationError as err:
            reasons.append(f"{path}: {annotator}, item {sub.item_id}: {err}")
            continue
        # a new submission adds one to the annotator's done items; the same one again adds nothing
        # (an item already submitted under another submission is refused by the store, never replaced)
        if after > before:
            imported += 1
        else:
            duplicates += 1
    return ImportReport(
        imported=imported, duplicates=duplicates, rejected=len(reasons), reasons=tuple(reasons)
    )
