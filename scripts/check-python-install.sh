#!/usr/bin/env bash
# Follows docs/python.md as a user would, from outside the repository: runs its install commands
# as written, at the root of this clone, with HOME set to a fresh temporary directory (so
# `~/venvs/locks` is a new virtualenv outside the repository, and pip builds and installs
# ./clients/python from scratch, fetching its dependencies from PyPI); then runs every Python
# program of that page and the README's, unchanged, from that directory, against a lockstream
# server started here (LOCKSTREAM_SERVER says where). The blocks are those marked
# `<!-- checked by scripts/check-python-install.sh: NAME -->` (test/support/doc-blocks.ts). Fails if a command or a program fails, or if a
# program does not print what a held lock prints. Needs python3 with venv, node and the
# repository built (`npm ci` builds it), and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

home=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$home"
}
trap cleanup EXIT

# The blocks of FILE marked `<!-- checked by scripts/check-python-install.sh: NAME -->` whose NAME
# matches the pattern, each ended by a line "@@end".
marked() {
  awk -v pattern="^<!-- checked by scripts/check-python-install.sh: ($2) -->$" '
    $0 ~ pattern { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```$/ { found = 0; print "@@end"; next }
    found == 2 { print }' "$1"
}
commands=$(marked docs/python.md install | sed -n 's/^\$ //p')
[[ -n $commands ]] || { echo "docs/python.md shows no install command (install)" >&2; exit 1; }

echo "check-python-install: HOME=$home; running docs/python.md's install commands at the root of the clone:"
sed 's/^/  $ /' <<<"$commands"
# What the user's pip would cache stays out of the fresh home (no downloads twice).
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}
HOME=$home PIP_DISABLE_PIP_VERSION_CHECK=1 bash -euo pipefail -c "$commands" >"$home/install.log" 2>&1 ||
  { cat "$home/install.log" >&2; echo "check-python-install: the install commands failed" >&2; exit 1; }
python=$home/venvs/locks/bin/python
[[ -x $python ]] || { echo "the README's commands made no $python" >&2; exit 1; }

# A server of its own, started as the quick start starts it (`npm start` runs `node dist/cli.js serve`), on a free port.
node dist/cli.js serve --port 0 --http-port 0 --log-format json >"$home/server.log" 2>&1 &
server_pid=$!
address=
for _ in $(seq 600); do
  address=$(sed -n 's/.*"msg":"lockstream listening on \([^"]*\)".*/\1/p' "$home/server.log" | head -n 1)
  [[ -n $address ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$home/server.log" >&2; echo "the server exited" >&2; exit 1; }
  sleep 0.1
done
[[ -n $address ]] || { cat "$home/server.log" >&2; echo "the server did not listen within 60 s" >&2; exit 1; }

# Each program as its own file in the fresh home, run from there: the installed package is the
# only lockstream it can import.
programs=0
while IFS= read -r -d '' program; do
  programs=$((programs + 1))
  file=$home/example-$programs.py
  printf '%s' "$program" >"$file"
  echo "check-python-install: Python program $programs of the docs, against $address:"
  output=$(cd "$home" && HOME=$home LOCKSTREAM_SERVER=$address "$python" "$file" 2>&1) ||
    { printf '%s\n' "$output" >&2; echo "check-python-install: program $programs failed" >&2; exit 1; }
  sed 's/^/  /' <<<"$output"
  grep -q 'fencing token [0-9][0-9]*' <<<"$output" ||
    { echo "check-python-install: program $programs printed no fencing token" >&2; exit 1; }
done < <({ marked docs/python.md 'python-sync|python-aio|python-aio-task|python-election|python-records'; marked README.md readme-python; } |
  awk '$0 == "@@end" { printf "%s%c", text, 0; text = ""; next } { text = text $0 "\n" }')
[[ $programs -ge 6 ]] || { echo "docs/python.md and README.md show $programs Python programs, not 6" >&2; exit 1; }

installed=$(cd "$home" && "$python" -c 'import lockstream; print(lockstream.__file__)')
[[ $installed == "$home"/* ]] || { echo "lockstream was imported from $installed, not the new virtualenv" >&2; exit 1; }

# The wheel: built as the page says, installed into a virtualenv of its own, and the first
# program run with it.
commands=$(marked docs/python.md install-wheel | sed -n 's/^\$ //p')
[[ -n $commands ]] || { echo "docs/python.md shows no wheel install (install-wheel)" >&2; exit 1; }
echo "check-python-install: docs/python.md's wheel commands:"
sed 's/^/  $ /' <<<"$commands"
HOME=$home PIP_DISABLE_PIP_VERSION_CHECK=1 bash -euo pipefail -c "$commands" >"$home/wheel.log" 2>&1 ||
  { cat "$home/wheel.log" >&2; echo "check-python-install: the wheel commands failed" >&2; exit 1; }
wheel_python=$home/venvs/from-wheel/bin/python
output=$(cd "$home" && HOME=$home LOCKSTREAM_SERVER=$address "$wheel_python" "$home/example-1.py" 2>&1) ||
  { printf '%s\n' "$output" >&2; echo "check-python-install: program 1 failed from the wheel" >&2; exit 1; }
grep -q 'fencing token [0-9][0-9]*' <<<"$output" ||
  { echo "check-python-install: program 1 printed no fencing token from the wheel" >&2; exit 1; }
from_wheel=$(cd "$home" && "$wheel_python" -c 'import lockstream; print(lockstream.__file__)')
[[ $from_wheel == "$home"/venvs/from-wheel/* ]] || { echo "lockstream was imported from $from_wheel, not the wheel's virtualenv" >&2; exit 1; }
echo "check-python-install: ok ($programs programs; lockstream from $installed; program 1 again from the wheel)"
