#!/usr/bin/env bash
# The system packages the test suite needs beyond python3, installed from Debian when missing
# (the first step of the README's test command, so that command passes on a bare Debian machine):
#
#   python3-venv      `python3 -m venv` (Debian's python3 ships without ensurepip)
#   chromium          the browser tests (tests/harness/view/test_browser.py) drive Debian's chromium
#                     through Playwright, at $DIALEVAL_CHROMIUM or /usr/bin/chromium; no browser download
#   fonts-noto-core   Arabic and Devanagari glyphs for those tests' screenshots
#   fonts-noto-cjk    Chinese, Japanese and Korean glyphs
#
# Silent when everything is there. Installs as root, or through sudo. When it cannot (no apt-get,
# neither root nor sudo, apt failing), it prints one line saying what is missing and how to get it,
# and exits 1.
set -uo pipefail

need=()
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need+=(python3-venv)
chromium="${DIALEVAL_CHROMIUM:-/usr/bin/chromium}"
[ -x "$chromium" ] || need+=(chromium)
fonts="$(fc-list 2>/dev/null)"
grep -qi "Noto Sans Arabic" <<<"$fonts" || need+=(fonts-noto-core)
grep -qi "Noto Sans CJK" <<<"$fonts" || need+=(fonts-noto-cjk)
[ "${#need[@]}" -eq 0 ] && exit 0

fail() {
  echo "provision_tests.sh: the tests need ${need[*]}, not installed: $1" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 ||
  fail "no apt-get here; install them with the system's package manager (or point DIALEVAL_CHROMIUM at a chromium)"
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 ||
    fail "not root and no sudo; ask an administrator for: apt-get install -y ${need[*]}"
  as_root=(sudo)
  [ -t 0 ] || as_root=(sudo -n)  # no terminal to ask for a password on
fi

log="${TMPDIR:-/tmp}/dialeval-provision-tests.log"
echo "provision_tests.sh: apt-get install -y ${need[*]} (log: $log)"
if ! { "${as_root[@]}" apt-get update -q &&
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"; } \
  >"$log" 2>&1; then
  why="$(grep -E '^(E|W): |sudo: ' "$log" | tail -n 1)"
  fail "apt-get failed (${why:-see the log}; log: $log)"
fi
[ -x "$chromium" ] || fail "apt-get installed chromium but there is no browser at $chromium; set DIALEVAL_CHROMIUM"
