#!/usr/bin/env bash
# The label-studio virtualenv that the real-server test of the Label Studio round trip
# (tests/harness/annotate/test_labelstudio_server.py) starts Label Studio from.
#
# Built once, outside the checkout, and reused by every later run and every clone:
#   ${DIALEVAL_LABEL_STUDIO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dialeval-harness/venvs/label-studio-<version>}
# Label Studio pins its own Django stack, so it lives in a virtualenv of its own (about 1 GB), never
# in the harness's. The harness itself is not installed there: the server runs no harness code.
# Beside it, template/label_studio.sqlite3 is an empty database with every migration applied: a
# server started on a copy of it is up in seconds instead of the two minutes the migrations take.
# A venv is used only once its `provisioned` marker is written, so an interrupted build is started
# again from scratch; a lock beside the venv keeps two runs from building it at the same time.
#
# Exit status: 0 the venv is ready (one line); 3 the label-studio package cannot be installed here
# (no index reachable, no wheel for this Python: one line saying so; the test then skips with that
# line); 1 anything else failed (one line naming the log).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=1.23.2
venv="${DIALEVAL_LABEL_STUDIO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dialeval-harness/venvs/label-studio-$VERSION}"
marker="$venv/provisioned"
template="$venv/template"

installed() {
  [ -x "$venv/bin/label-studio" ] &&
    "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('label-studio') == '$VERSION'" >/dev/null 2>&1
}
mkdir -p "$(dirname "$venv")"
# one build at a time (checkouts share the venv): a second run waits for the first, then finds it ready
exec 9>"$(dirname "$venv")/label-studio-$VERSION.lock"
flock 9
if [ -f "$marker" ] && [ -f "$template/label_studio.sqlite3" ] && installed; then
  echo "label-studio $VERSION virtualenv: $venv (already provisioned)"
  exit 0
fi

log="$(dirname "$venv")/label-studio-$VERSION.log"
start=$SECONDS
why() {
  local line
  line="$(grep -E '^(ERROR|error|[A-Za-z]*Error)' "$log" | grep -v 'dependency resolver' | tail -n 1)"
  echo "${line:-see the log}"
}

set +e # the build's own errexit must not be switched off by testing its status (`( ... ) || ...`)
if [ -f "$marker" ] && installed; then
  echo "adding the migrated template database to the label-studio $VERSION virtualenv at $venv (log: $log) ..."
  : >"$log"
else
  echo "provisioning the label-studio $VERSION virtualenv at $venv (once, about 1 GB; log: $log) ..."
  (
    set -euxo pipefail
    rm -rf "$venv"
    python3 -m venv "$venv"
  ) >"$log" 2>&1
  if [ $? -ne 0 ]; then
    echo "could not create the label-studio virtualenv at $venv: $(why) (log: $log)" >&2
    exit 1
  fi
  (
    set -euxo pipefail
    "$venv/bin/python" -m pip install -q -c constraints.txt "label-studio==$VERSION"
  ) >>"$log" 2>&1
  if [ $? -ne 0 ]; then
    rm -rf "$venv"
    echo "the label-studio $VERSION package cannot be installed here: $(why) (log: $log)" >&2
    exit 3
  fi
fi
(
  set -euxo pipefail
  rm -rf "$template" "$template.new"
  # `label-studio user` applies every migration to the database of LABEL_STUDIO_BASE_DATA_DIR, looks up
  # a user that does not exist and exits (`label-studio --version` would go on to start a server)
  LABEL_STUDIO_BASE_DATA_DIR="$template.new" LATEST_VERSION_CHECK=false COLLECT_ANALYTICS=false SENTRY_DSN="" \
    "$venv/bin/label-studio" user --username nobody@localhost
  test -s "$template.new/label_studio.sqlite3"
  mv "$template.new" "$template"
  echo "label-studio $VERSION" >"$marker"
) >>"$log" 2>&1
if [ $? -ne 0 ]; then
  echo "label-studio $VERSION installed at $venv but does not run: $(why) (log: $log)" >&2
  exit 1
fi
echo "label-studio $VERSION virtualenv ready at $venv ($((SECONDS - start)) s)"
