"""The Label Studio route without a server: the labeling config generated from a form (every field,
every scale point, parseable XML), blind and escaped tasks, and the reader of Label Studio JSON
exports (a real export of Label Studio 1.23 saved in labelstudio_export.json): annotators kept,
skips kept, and every bad cell refused with one error naming the file, the task and the field."""

from __future__ import annotations

import html
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.annotate.form import Field, Form
from harness.annotate.labelstudio import (
    FLAG,
    TRANSCRIPT,
    LabelStudioExportError,
    import_ls,
    labeling_config,
    read_ls_export,
    task_for,
    tasks,
    write_export,
)
from harness.annotate.store import ItemView, Project
from tests.fixtures.annotate_projects import medal_dataset

EXPORT = Path(__file__).with_name("labelstudio_export.json")

LIKERT = ((1.0, "very poor"), (2.0, "poor"), (3.0, "fair"), (4.0, "good"), (5.0, "excellent"))


def _form() -> Form:
    return Form(
        task="medal",
        dataset="medal-demo",
        level="turn",
        guideline="# Guideline\n\nRate the **response**.",
        fields=(
            Field(
                dimension="overall",
                kind="likert",
                min=1,
                max=5,
                points=LIKERT,
                definition="Overall quality of the response.",
                keys=("1", "2", "3", "4", "5"),
            ),
            Field(
                dimension="repetition",
                kind="binary",
                min=0,
                max=1,
                points=((0.0, "no"), (1.0, "yes")),
                definition="The response repeats itself or the context.",
                keys=("r",),
            ),
            Field(
                dimension="relevance",
                kind="continuous",
                min=0,
                max=1,
                points=(),
                definition="How relevant the response is.",
                keys=(),
            ),
        ),
    )


def _config() -> ET.Element:
    return ET.fromstring(labeling_config(_form()))


def test_config_has_one_control_per_field_with_its_scale_points():
    root = _config()
    assert root.tag == "View"
    (obj,) = root.iter("HyperText")
    assert obj.get("name") == TRANSCRIPT and obj.get("value") == f"${TRANSCRIPT}"
    controls = {el.get("name"): el for el in root.iter() if el.get("toName") is not None}
    assert set(controls) == {"overall", "repetition", "relevance", FLAG}
    assert all(el.get("toName") == TRANSCRIPT for el in controls.values())

    overall = controls["overall"]
    assert overall.tag == "Choices" and overall.get("required") == "true"
    choices = overall.findall("Choice")
    assert [c.get("alias") for c in choices] == ["1", "2", "3", "4", "5"]
    assert [c.get("value") for c in choices] == [f"{v:g} — {w}" for v, w in LIKERT]
    assert overall.get("choice") == "single-radio"

    repetition = controls["repetition"]
    assert repetition.tag == "Choices"
    assert [(c.get("value"), c.get("alias")) for c in repetition.findall("Choice")] == [
        ("no", "0"),
        ("yes", "1"),
    ]

    relevance = controls["relevance"]
    assert relevance.tag == "Number" and (relevance.get("min"), relevance.get("max")) == ("0", "1")
    assert controls[FLAG].tag == "TextArea"
    headers = [h.get("value") for h in root.iter("Header")]
    assert "Overall quality of the response." in headers and "repetition" in headers


def test_config_of_a_likert_field_without_wordings_has_its_integers():
    plain = Field(
        dimension="engaging",
        kind="likert",
        min=0,
        max=4,
        points=(),
        definition="",
        keys=("0", "1", "2", "3", "4"),
    )
    form = Form(task=None, dataset="d", level="dialogue", guideline="", fields=(plain,))
    (choices,) = ET.fromstring(labeling_config(form)).iter("Choices")
    assert [(c.get("value"), c.get("alias")) for c in choices.findall("Choice")] == [
        (str(i), str(i)) for i in range(5)
    ]


@pytest.mark.parametrize("name", [TRANSCRIPT, FLAG])
def test_config_refuses_a_dimension_named_like_the_transcript_or_the_flag(name):
    form = _form()
    clash = Field(dimension=name, kind="binary", min=0, max=1, points=(), definition="", keys=("x",))
    with pytest.raises(ValueError, match=f"dimension '{name}'.*rename"):
        labeling_config(Form(form.task, form.dataset, form.level, form.guideline, (*form.fields, clash)))


def test_config_escapes_definitions():
    form = _form()
    odd = Field(
        dimension="fluency", kind="binary", min=0, max=1, points=(), definition='<b>"a" & b</b>', keys=("f",)
    )
    root = ET.fromstring(labeling_config(Form(form.task, form.dataset, form.level, form.guideline, (odd,))))
    assert '<b>"a" & b</b>' in [h.get("value") for h in root.iter("Header")]


def _view(**over: object) -> ItemView:
    base: dict[str, object] = {
        "item_id": "xdial/ar/0007",
        "position": 1,
        "total": 3,
        "language": "ar",
        "direction": "rtl",
        "level": "turn",
        "context": [{"role": "user", "text": "مرحبا <script>alert(1)</script>", "turn": 1}],
        "response": "أهلا\nكيف حالك؟",
        "response_role": "assistant",
        "reference": "وعليكم السلام",
        "persona": None,
        "scene": "a café",
        "turns": None,
        "previous": None,
    }
    base.update(over)
    return ItemView(**base)  # type: ignore[arg-type]


def test_task_holds_the_transcript_and_ids_only_escaped_and_right_to_left():
    task = task_for(_view())
    data = task["data"]
    assert isinstance(data, dict) and set(data) == {"item_id", "language", TRANSCRIPT}
    assert data["item_id"] == "xdial/ar/0007" and data["language"] == "ar"
    text = data[TRANSCRIPT]
    assert text.startswith('<div dir="rtl" lang="ar">')
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "أهلا<br>كيف حالك؟" in text and "the response to rate" in text
    assert "user · turn 1" in text and "a café" in text and "وعليكم السلام" in text


def test_dialogue_level_task_shows_every_turn():
    turns = [{"role": "user", "text": "hi", "turn": 1}, {"role": "assistant", "text": "hello", "turn": 2}]
    view = _view(level="dialogue", direction="ltr", language="en", context=[], response=None, turns=turns)
    text = task_for(view)["data"][TRANSCRIPT]  # type: ignore[index]
    assert "assistant · turn 2" in text and "hello" in text and "the response to rate" not in text


# --------------------------------------------------------------------------------------------------
# reading exports


def test_reads_a_real_export_keeping_annotators_and_skips():
    rows = read_ls_export(EXPORT, _form())
    assert [(who, sub.item_id) for who, sub in rows] == [
        ("ann.a@example.org", "item-0"),
        ("ann.b@example.org", "item-0"),
        ("ann.a@example.org", "item-1"),
        ("ann.b@example.org", "item-1"),
    ]
    first = rows[0][1]
    assert first.labels == {"overall": 4.0, "repetition": 0.0, "relevance": pytest.approx(0.75)}
    assert first.flag is None and not first.skip
    assert rows[1][1].labels == {"overall": 2.0, "repetition": 1.0, "relevance": pytest.approx(0.25)}
    assert rows[1][1].flag == "off topic"
    assert rows[3][1].skip and rows[3][1].labels == {}
    ids = [sub.submission_id for _, sub in rows]
    assert len(set(ids)) == 4
    assert ids == [sub.submission_id for _, sub in read_ls_export(EXPORT, _form())]  # stable


def _edited(tmp_path: Path, edit) -> Path:
    tasks = json.loads(EXPORT.read_text(encoding="utf-8"))
    edit(tasks)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    return path


def _result(tasks, name):
    return next(r for r in tasks[0]["annotations"][0]["result"] if r["from_name"] == name)


def test_a_label_outside_the_scale_is_refused_naming_file_task_and_field(tmp_path):
    path = _edited(tmp_path, lambda t: _result(t, "overall")["value"].update(choices=["6"]))
    task_id = json.loads(path.read_text())[0]["id"]
    with pytest.raises(LabelStudioExportError) as err:
        read_ls_export(path, _form())
    msg = str(err.value)
    assert str(path) in msg and f"task {task_id}" in msg and "field 'overall'" in msg
    assert "6 is outside" in msg and "ann.a@example.org" in msg


@pytest.mark.parametrize(
    ("edit", "field", "problem"),
    [
        (
            lambda t: _result(t, "overall")["value"].update(choices=["superb"]),
            "overall",
            "no point of the scale",
        ),
        (
            lambda t: _result(t, "overall")["value"].update(choices=["2", "3"]),
            "overall",
            "exactly one choice",
        ),
        (lambda t: _result(t, "repetition")["value"].update(choices=["0.5"]), "repetition", "not an integer"),
        (lambda t: _result(t, "relevance")["value"].update(number=1.5), "relevance", "outside"),
        (lambda t: _result(t, "relevance")["value"].update(number="high"), "relevance", "expected a number"),
        (lambda t: _result(t, "overall").update(from_name="quality"), "quality", "not a field of the form"),
        (
            lambda t: t[0]["annotations"][0]["result"].remove(_result(t, "repetition")),
            "repetition",
            "no label",
        ),
        (lambda t: t[0]["data"].pop("item_id"), "data.item_id", "export-ls"),
        (lambda t: t[0]["annotations"][0].pop("completed_by"), "completed_by", "no annotator"),
        (lambda t: t[0]["annotations"][0].update(result="x"), "annotations.0.result", "list"),
    ],
)
def test_bad_cells_are_refused_with_one_error(tmp_path, edit, field, problem):
    path = _edited(tmp_path, edit)
    with pytest.raises(LabelStudioExportError) as err:
        read_ls_export(path, _form())
    msg = str(err.value)
    assert f"field {field!r}" in msg and problem in msg and "task " in msg and str(path) in msg


@pytest.mark.parametrize(
    ("content", "problem"),
    [("{not json", "not a Label Studio JSON export"), ('{"a": 1}', "expected a list of tasks")],
)
def test_a_file_that_is_no_json_export_is_refused(tmp_path, content, problem):
    path = tmp_path / "x.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LabelStudioExportError, match=problem):
        read_ls_export(path, _form())


# --------------------------------------------------------------------------------------------------
# importing into a project


@pytest.fixture(scope="module")
def medal_dir(tmp_path_factory) -> Path:
    return medal_dataset(tmp_path_factory.mktemp("ls-medal"))


def _medal_project(path: Path, medal_dir: Path) -> Project:
    return Project.create(
        path,
        name="medal-ls",
        dataset_ref="medal-synthetic@1.0.0",
        dataset_dir=medal_dir,
        config=None,
        task="medal",
        annotators=["ann.a@example.org", "ann.b@example.org"],
        per_item=2,
        languages=["en"],
        select="random",
        judge_run=None,
        seed=0,
    )


def _ls_export(project: Project, annotations: dict[str, list[tuple[str, dict[str, float]]]]) -> list:
    """A Label Studio JSON export of the project's tasks: ``annotations`` maps an item id to its
    (annotator email, labels) pairs, written as Label Studio writes choices (the alias)."""
    out = []
    for n, task in enumerate(tasks(project), 1):
        data = task["data"]
        assert isinstance(data, dict)
        anns = []
        for k, (who, labels) in enumerate(annotations.get(str(data["item_id"]), []), 1):
            result = [
                {"from_name": d, "to_name": TRANSCRIPT, "type": "choices", "value": {"choices": [f"{v:g}"]}}
                for d, v in labels.items()
            ]
            anns.append({"id": n * 10 + k, "completed_by": {"id": k + 1, "email": who}, "result": result})
        out.append({"id": n, "data": data, "annotations": anns})
    return out


def test_tasks_cover_every_item_blind(tmp_path, medal_dir):
    project = _medal_project(tmp_path / "p.sqlite", medal_dir)
    got = tasks(project)
    assert [t["data"]["item_id"] for t in got] == list(project.items()["item_id"])  # type: ignore[index]
    records = {key: rec for key, _, rec in project.records()}
    for task in got:
        data = task["data"]
        assert isinstance(data, dict) and set(data) == {"item_id", "language", TRANSCRIPT}
        rec = records[str(data["item_id"])]
        for name in ("system", "model", "chatbot"):
            value = rec.get(name)
            if isinstance(value, str) and value:
                assert value not in json.dumps(task, ensure_ascii=False)
        first = rec["turns"][0]["text"]  # type: ignore[index]
        assert html.escape(first) in str(data[TRANSCRIPT])
    tasks_path, config_path = write_export(project, tmp_path / "out")
    assert json.loads(tasks_path.read_text(encoding="utf-8")) == got
    assert ET.fromstring(config_path.read_text(encoding="utf-8")).tag == "View"
    assert "<h" in (tmp_path / "out" / "instructions.html").read_text(encoding="utf-8")


def test_import_is_idempotent_and_reports_what_the_store_refuses(tmp_path, medal_dir):
    project = _medal_project(tmp_path / "p.sqlite", medal_dir)
    items = list(project.items()["item_id"])
    good = {d: 0.0 for d in project.form.dimensions} | {"overall": 4.0}
    annotations = {items[0]: [("ann.a@example.org", good), ("ann.b@example.org", good)]}
    annotations[items[1]] = [("stranger@example.org", good)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_ls_export(project, annotations)), encoding="utf-8")

    first = import_ls(project, path)
    assert (first.imported, first.duplicates, first.rejected) == (2, 0, 1)
    assert "stranger@example.org" in first.reasons[0] and str(path) in first.reasons[0]
    again = import_ls(project, path)
    assert (again.imported, again.duplicates, again.rejected) == (0, 2, 1)
    table = project.labels()
    assert sorted(set(table["annotator"])) == ["ann.a@example.org", "ann.b@example.org"]
    assert len(table) == 2 * len(project.form.dimensions)

    changed = good | {"overall": 2.0}  # relabelled in Label Studio after the first import
    annotations = {items[0]: [("ann.a@example.org", changed)]}
    path.write_text(json.dumps(_ls_export(project, annotations)), encoding="utf-8")
    third = import_ls(project, path)
    assert (third.imported, third.rejected) == (0, 1) and "already submitted" in third.reasons[0]
    assert set(project.labels().query("dimension == 'overall'")["value"]) == {4.0}


def test_an_export_with_a_bad_cell_imports_nothing(tmp_path, medal_dir):
    project = _medal_project(tmp_path / "p.sqlite", medal_dir)
    items = list(project.items()["item_id"])
    good = {d: 0.0 for d in project.form.dimensions} | {"overall": 4.0}
    annotations = {
        items[0]: [("ann.a@example.org", good)],
        items[1]: [("ann.a@example.org", good | {"overall": 6.0})],
    }
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_ls_export(project, annotations)), encoding="utf-8")
    with pytest.raises(LabelStudioExportError, match=r"field 'overall': 6 is outside"):
        import_ls(project, path)
    assert project.labels().empty


# --------------------------------------------------------------------------------------------------
# provisioning the server's virtualenv

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "provision_label_studio.sh"


def _provision(tmp_path: Path, pip: str, label_studio: str = "exit 0") -> subprocess.CompletedProcess[str]:
    """Run the script with a stand-in ``python3`` whose venvs run ``pip`` (sh) as their python and
    ``label_studio`` (sh) as their label-studio command."""
    fake = tmp_path / "bin"
    fake.mkdir()
    script = '#!/bin/sh\n[ "$1" = "-m" ] && [ "$2" = "venv" ] || exit 1\nmkdir -p "$3/bin"\n'
    for name, body in (("python", pip), ("label-studio", label_studio)):
        script += f'cat > "$3/bin/{name}" <<\'EOF\'\n#!/bin/sh\n{body}\nEOF\nchmod +x "$3/bin/{name}"\n'
    (fake / "python3").write_text(script)
    (fake / "python3").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "DIALEVAL_LABEL_STUDIO_VENV": str(tmp_path / "v"),
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_provisioning_says_in_one_line_that_the_package_cannot_be_installed(tmp_path):
    res = _provision(tmp_path, 'echo "ERROR: No matching distribution found for label-studio" >&2; exit 1')
    assert res.returncode == 3, (res.stdout, res.stderr)
    (line,) = res.stderr.strip().splitlines()
    assert "package cannot be installed here" in line and "No matching distribution" in line
    assert str(tmp_path) in line  # the log's path
    assert not (tmp_path / "v").exists()  # nothing half-built is left to be taken for a venv


def test_provisioning_fails_in_one_line_when_the_installed_server_does_not_run(tmp_path):
    res = _provision(tmp_path, "exit 0", 'echo "ImportError: no django" >&2; exit 1')
    assert res.returncode == 1, (res.stdout, res.stderr)
    (line,) = res.stderr.strip().splitlines()
    assert "does not run" in line and "ImportError: no django" in line
    assert not (tmp_path / "v" / "provisioned").exists()
