"""scripts/device_stage.py: files cut into per-call chunks, put back together and hash-checked on the
other side, runs started once their files are complete, outputs collected (and cut to size)."""

from __future__ import annotations

import importlib.util
import json
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ds(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("device_stage", ROOT / "scripts" / "device_stage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "STAGE", tmp_path / "stage")
    return mod


def _files(tmp_path: Path) -> list[Path]:
    src = tmp_path / "src"
    src.mkdir()
    out = []
    for name, size, seed in (("a.whl", 2500, 1), ("b.whl", 100, 2), ("model.gguf", 1800, 3)):
        p = src / name
        p.write_bytes(bytes((i * 7 + seed) % 251 for i in range(size)))
        out.append(p)
    return out


def _wait(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_pack_step_launch_collect(ds, tmp_path):
    files = _files(tmp_path)
    folders = ds.pack(files, tmp_path / "chunks", chunk_bytes=1000)
    assert [f.name for f in folders] == ["1", "2", "3", "4", "5"]
    assert sum((f / "chunk.bin").stat().st_size for f in folders) == 4400
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tool.txt").write_text("in the repository copy\n")
    launches = [
        "wheels=*.whl:cat tool.txt > $OUT/seen.txt && ls $STAGED > $OUT/staged.txt",
        "model=*.whl,model.gguf:cp $STAGED/model.gguf $OUT/",
    ]
    stage = tmp_path / "stage"
    for k, folder in enumerate(folders, 1):
        ds.step(folder, launches, repo)
        launched = {p.stem for p in stage.glob("*.launched")}
        # a.whl ends in chunk 3, b.whl in 3, model.gguf in 5: no run starts before its files are whole
        assert launched == ({"wheels"} if 3 <= k < 5 else {"wheels", "model"} if k == 5 else set())
    for f in files:
        assert (stage / "files" / f.name).read_bytes() == f.read_bytes()
    _wait(stage / "model.rc")
    _wait(stage / "wheels.rc")
    out = tmp_path / "out"
    ds.collect(out, wait=30)
    with tarfile.open(out / "wheels.tgz") as tf:
        seen = tf.extractfile("wheels/seen.txt").read().decode()
        staged = tf.extractfile("wheels/staged.txt").read().decode().split()
    assert seen == "in the repository copy\n"
    assert {"a.whl", "b.whl"} <= set(staged)
    with tarfile.open(out / "model.tgz") as tf:
        assert tf.extractfile("model/model.gguf").read() == files[2].read_bytes()
    assert (out / "model.log").exists()
    assert len(list(stage.glob("wheels*.launched"))) == 1  # started once, though chunks 4 and 5 came after


def test_chunks_must_arrive_in_order(ds, tmp_path):
    folders = ds.pack(_files(tmp_path), tmp_path / "chunks", chunk_bytes=1000)
    with pytest.raises(SystemExit, match="chunk 2 needs 1000 bytes staged before it, found 0"):
        ds.step(folders[1], [], tmp_path)


def test_corruption_in_transit_is_an_error(ds, tmp_path):
    folders = ds.pack(_files(tmp_path), tmp_path / "chunks", chunk_bytes=5000)
    data = bytearray((folders[0] / "chunk.bin").read_bytes())
    data[10] ^= 0xFF
    (folders[0] / "chunk.bin").write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="a.whl corrupted in transit"):
        ds.step(folders[0], [], tmp_path)


def test_manifest_records_every_file(ds, tmp_path):
    files = _files(tmp_path)
    folders = ds.pack(files, tmp_path / "chunks", chunk_bytes=1000)
    m = json.loads((folders[0] / "manifest.json").read_text())
    assert [e["name"] for e in m["files"]] == [f.name for f in files]
    assert [e["offset"] for e in m["files"]] == [0, 2500, 2600]
    assert m["total"] == 4400 and m["chunk"] == 1
    with pytest.raises(SystemExit, match="two files share a name"):
        ds.pack([files[0], files[0]], tmp_path / "dup", chunk_bytes=1000)


def test_collect_cuts_large_outputs(ds, tmp_path, monkeypatch):
    stage = tmp_path / "stage"
    (stage / "big-out").mkdir(parents=True)
    import random

    rnd = random.Random(0)  # incompressible: the tarball stays larger than the 4 KiB pieces
    payload = bytes(rnd.randrange(256) for _ in range(20000))
    (stage / "big-out" / "x.bin").write_bytes(payload)
    (stage / "big.launched").write_text("now\n")
    (stage / "big.log").write_text("log\n")
    (stage / "big.rc").write_text("0\n")
    monkeypatch.setattr(ds, "PIECE", 4096)
    out = tmp_path / "out"
    ds.collect(out, wait=0)
    pieces = sorted(out.glob("big.tgz.*"))
    assert len(pieces) >= 5 and not (out / "big.tgz").exists()
    joined = tmp_path / "big.tgz"
    joined.write_bytes(b"".join(p.read_bytes() for p in pieces))
    with tarfile.open(joined) as tf:
        assert tf.extractfile("big/x.bin").read() == payload


def test_after_waits_for_another_run_and_stops_when_it_failed(ds, tmp_path):
    folders = ds.pack(_files(tmp_path), tmp_path / "chunks", chunk_bytes=10_000)
    repo = tmp_path / "repo"
    repo.mkdir()
    stage = tmp_path / "stage"
    launches = [
        "setup=*.whl:sleep 0.5 && echo installed > $STAGED/../installed.txt",
        "llm=model.gguf,after:setup:cat $STAGED/../installed.txt > $OUT/seen.txt",
        "broken=a.whl:exit 7",
        "after-broken=b.whl,after:broken:touch $OUT/ran",
    ]
    ds.step(folders[0], launches, repo)  # one chunk holds everything: all four start at once
    for name in ("llm", "after-broken"):
        _wait(stage / f"{name}.rc")
    assert (stage / "llm.rc").read_text().strip() == "0"
    assert (stage / "llm-out" / "seen.txt").read_text() == "installed\n"  # setup had finished first
    assert (stage / "after-broken.rc").read_text().strip() == "3"
    assert not (stage / "after-broken-out" / "ran").exists()
    assert "broken failed or unfinished" in (stage / "after-broken.log").read_text()


def test_a_bad_launch_line_is_a_clear_error(ds, tmp_path):
    folders = ds.pack(_files(tmp_path), tmp_path / "chunks", chunk_bytes=10_000)
    with pytest.raises(SystemExit, match="bad launch"):
        ds.step(folders[0], ["nocolon=just-a-name"], tmp_path)
