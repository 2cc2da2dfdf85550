"""The Label Studio round trip against a real Label Studio server (the label-studio package from the
virtualenv scripts/provision_label_studio.sh builds), started once on 127.0.0.1 on a copy of the
migrated SQLite database beside it: a project created through its REST API with the labeling config
of ``write_export``, the exported tasks imported, annotations of two users created through the API
posted (one skipping a task, one flagging one), the project exported as JSON, and ``import_ls``
bringing it back: the project store holds exactly the posted labels under each user's email, and a second
import adds nothing. Skips only when the provisioning script says the package cannot be installed."""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from harness.annotate.form import Field, Form
from harness.annotate.labelstudio import FLAG, TRANSCRIPT, import_ls, read_ls_export, write_export
from harness.annotate.store import Project
from tests.fixtures.annotate_projects import demo_dataset, medal_dataset

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "provision_label_studio.sh"
ANNOTATORS = ("ann.a@example.org", "ann.b@example.org")
START_TIMEOUT_S = 300  # seconds on a migrated database; minutes if it had to migrate


def _venv() -> Path:
    """The provisioned virtualenv (the script is a no-op once it exists); skip only when the script
    says the package cannot be installed here."""
    res = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=3600, check=False)
    if res.returncode == 3:
        pytest.skip(res.stderr.strip())
    if res.returncode != 0:
        pytest.fail(f"{SCRIPT.name} failed (exit {res.returncode}): {res.stdout}{res.stderr}")
    version = re.search(r"^VERSION=(\S+)$", SCRIPT.read_text(encoding="utf-8"), re.M)
    assert version, f"no VERSION= line in {SCRIPT}"
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    default = cache / "dialeval-harness" / "venvs" / f"label-studio-{version.group(1)}"
    return Path(os.environ.get("DIALEVAL_LABEL_STUDIO_VENV", default))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LabelStudio:
    """A running server and an API client authenticated as its admin."""

    url: str
    client: httpx.Client

    def call(self, method: str, path: str, **kwargs: object) -> object:
        res = self.client.request(method, path, **kwargs)  # type: ignore[arg-type]
        assert res.status_code < 300, f"{method} {path}: HTTP {res.status_code}: {res.text[:800]}"
        return res.json()


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory) -> Iterator[LabelStudio]:
    venv = _venv()
    data = tmp_path_factory.mktemp("label-studio")
    # a copy of the provisioned, fully migrated empty database: up in seconds, not minutes
    shutil.copyfile(venv / "template" / "label_studio.sqlite3", data / "label_studio.sqlite3")
    port, token = _free_port(), secrets.token_hex(20)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        LABEL_STUDIO_BASE_DATA_DIR=str(data),
        LATEST_VERSION_CHECK="false",
        COLLECT_ANALYTICS="false",
        SENTRY_DSN="",
        FRONTEND_SENTRY_DSN="",
    )
    cmd = [
        str(venv / "bin" / "label-studio"),
        "start",
        "--no-browser",
        "--internal-host",
        "127.0.0.1",  # Label Studio listens on 0.0.0.0 by default
        "--port",
        str(port),
        "--username",
        "admin@example.org",
        "--password",
        secrets.token_urlsafe(16),
        "--user-token",
        token,
        "--enable-legacy-api-token",
    ]
    log_path = data / "server.log"
    url = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            cmd, cwd=data, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"Label Studio exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}")
            if time.monotonic() - start > START_TIMEOUT_S:
                pytest.fail(f"Label Studio not up after {START_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        print(f"Label Studio started in {time.monotonic() - start:.0f} s")
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            yield LabelStudio(url, client)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _result(f: Field, value: float) -> dict[str, object]:
    """The result Label Studio's labeling UI writes for ``value`` of ``f`` (a choice's alias)."""
    if f.kind == "continuous":
        payload: dict[str, object] = {"number": value}
        kind = "number"
    else:
        payload, kind = {"choices": [f"{value:g}"]}, "choices"
    return {"from_name": f.dimension, "to_name": TRANSCRIPT, "type": kind, "value": payload}


def _pick(f: Field, rng: random.Random) -> float:
    if f.kind == "continuous":
        return round(rng.uniform(f.min, f.max), 2)
    points = [v for v, _ in f.points] or list(range(int(f.min), int(f.max) + 1))
    return float(rng.choice(points))


def _export(ls: LabelStudio, project_id: int, path: Path, *, emails: bool) -> Path:
    """Export the project as JSON: with the annotators' emails (an export snapshot whose
    ``completed_by`` is expanded), or as the Export button does (numeric user ids)."""
    if emails:
        options = {"serialization_options": {"annotations__completed_by": {"only_id": False}}}
        snap = ls.call("POST", f"/api/projects/{project_id}/exports", json=options)
        assert isinstance(snap, dict)
        for _ in range(120):
            state = ls.call("GET", f"/api/projects/{project_id}/exports/{snap['id']}")
            if isinstance(state, dict) and state.get("status") == "completed":
                break
            time.sleep(0.5)
        url = f"/api/projects/{project_id}/exports/{snap['id']}/download"
    else:
        url = f"/api/projects/{project_id}/export"
    res = ls.client.get(url, params={"exportType": "JSON"})
    assert res.status_code == 200, res.text[:800]
    path.write_bytes(res.content)
    return path


def _project(root: Path, kind: str) -> Project:
    """Both annotators label every item, as every Label Studio user can: a MEDAL-style project
    (dialogue level, eight binary issues and overall 1–5) or an xDial-style one (turn level, a 1–5
    scale, Arabic items, right to left)."""
    common = {"annotators": list(ANNOTATORS), "per_item": 2, "select": "random", "judge_run": None, "seed": 0}
    if kind == "medal":
        return Project.create(
            root / "medal.sqlite",
            name="medal-ls",
            dataset_ref="medal-synthetic@1.0.0",
            dataset_dir=medal_dataset(root),
            config=None,
            task="medal",
            languages=None,
            **common,  # type: ignore[arg-type]
        )
    return Project.create(
        root / "xdial.sqlite",
        name="xdial-ls",
        dataset_ref="demo@1.0.0",
        dataset_dir=demo_dataset(root),
        config="demo-turn",
        task=None,
        languages=["ar"],
        **common,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("kind", ["medal", "xdial"])
def test_label_studio_round_trip_keeps_every_label_and_annotator(label_studio, tmp_path, kind):
    ls = label_studio
    project = _project(tmp_path, kind)
    form: Form = project.form
    tasks_path, config_path = write_export(project, tmp_path / "ls")
    tasks = json.loads(tasks_path.read_text(encoding="utf-8"))
    assert len(tasks) == len(project.items())

    created = ls.call(
        "POST",
        "/api/projects",
        json={
            "title": project.name,
            "label_config": config_path.read_text(encoding="utf-8"),  # Label Studio validates it
            "expert_instruction": (tmp_path / "ls" / "instructions.html").read_text(encoding="utf-8"),
            "show_instruction": True,
        },
    )
    assert isinstance(created, dict)
    pid = created["id"]
    imported = ls.call("POST", f"/api/projects/{pid}/import", json=tasks)
    assert isinstance(imported, dict) and imported["task_count"] == len(tasks)
    users = ls.call("GET", "/api/users/")
    assert isinstance(users, list)
    known = {u["email"]: u["id"] for u in users}
    user_ids = {
        email: known.get(email)
        or ls.call("POST", "/api/users/", json={"email": email, "username": email.split("@")[0]})["id"]  # type: ignore[index]
        for email in ANNOTATORS
    }
    listed = ls.call("GET", "/api/tasks", params={"project": pid, "page_size": 1000})
    assert isinstance(listed, dict)
    ls_tasks = {t["data"]["item_id"]: t["id"] for t in listed["tasks"]}
    assert set(ls_tasks) == {t["data"]["item_id"] for t in tasks}

    rng = random.Random(7)
    posted: dict[tuple[str, str], dict[str, float]] = {}
    skipped = (ANNOTATORS[1], sorted(ls_tasks)[-1])
    flagged = (ANNOTATORS[0], sorted(ls_tasks)[0])
    for item_id, task_id in sorted(ls_tasks.items()):
        for email in ANNOTATORS:
            body: dict[str, object] = {"completed_by": user_ids[email]}
            if (email, item_id) == skipped:
                body.update(result=[], was_cancelled=True)
            else:
                labels = {f.dimension: _pick(f, rng) for f in form.fields}
                result = [_result(form.field(d), v) for d, v in labels.items()]
                if (email, item_id) == flagged:
                    text = {"text": ["transcript cut off"]}
                    result.append(
                        {"from_name": FLAG, "to_name": TRANSCRIPT, "type": "textarea", "value": text}
                    )
                body.update(result=result)
                posted[(email, item_id)] = labels
            ls.call("POST", f"/api/tasks/{task_id}/annotations/", json=body)

    plain = read_ls_export(_export(ls, pid, tmp_path / "plain.json", emails=False), form)
    assert {who for who, _ in plain} == {str(i) for i in user_ids.values()}  # the Export button: ids

    export = _export(ls, pid, tmp_path / "export.json", emails=True)
    n = len(ls_tasks) * len(ANNOTATORS)
    report = import_ls(project, export)
    assert (report.imported, report.duplicates, report.rejected) == (n, 0, 0), report.reasons
    again = import_ls(project, export)
    assert (again.imported, again.duplicates, again.rejected) == (0, n, 0)

    table = project.labels()
    labelled = table[~table["skipped"].astype(bool)]
    got: dict[tuple[str, str], dict[str, float]] = {}
    for row in labelled.itertuples():
        got.setdefault((str(row.annotator), str(row.item_id)), {})[str(row.dimension)] = float(row.value)
    assert set(got) == set(posted)
    for key, labels in posted.items():
        assert got[key] == pytest.approx(labels), key
    skips = table[table["skipped"].astype(bool)]
    assert {(str(r.annotator), str(r.item_id)) for r in skips.itertuples()} == {skipped}
    flags = table[table["flag"].notna()]
    assert {(str(r.annotator), str(r.item_id)) for r in flags.itertuples()} == {flagged}
    assert set(flags["flag"]) == {"transcript cut off"}
