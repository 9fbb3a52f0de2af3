#!/usr/bin/env bash
# Follows the README's "From Python" section as a user would, from outside the repository: runs
# its install commands as written, at the root of this clone, with HOME set to a fresh temporary
# directory (so `~/venvs/locks` is a new virtualenv outside the repository, and pip builds and
# installs ./clients/python from scratch, fetching its dependencies from PyPI); then runs every
# Python program of the section, unchanged, from that directory, against a lockstream server
# started here (LOCKSTREAM_SERVER says where). Fails if a command or a program fails, or if a
# program does not print what a held lock prints. Needs python3 with venv, node and the
# repository's node_modules (`npm ci`), and PyPI.
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

# The section, from its heading to the next one; its ```console and ```python blocks.
section=$(awk '/^## From Python$/ { on = 1; next } /^## / { on = 0 } on' README.md)
[[ -n $section ]] || { echo "README.md has no '## From Python' section" >&2; exit 1; }
block() { # block LANGUAGE: every fenced block of that language, each ended by a line "@@end"
  awk -v fence="\`\`\`$1" '$0 == fence { on = 1; next } on && /^```$/ { on = 0; print "@@end"; next } on' <<<"$section"
}
commands=$(block console | sed -n 's/^\$ //p')
[[ -n $commands ]] || { echo "README.md's Python section shows no install command" >&2; exit 1; }

echo "check-python-install: HOME=$home; running the README's commands at the root of the clone:"
sed 's/^/  $ /' <<<"$commands"
# What the user's pip would cache stays out of the fresh home (no downloads twice).
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}
HOME=$home PIP_DISABLE_PIP_VERSION_CHECK=1 bash -euo pipefail -c "$commands" >"$home/install.log" 2>&1 ||
  { cat "$home/install.log" >&2; echo "check-python-install: the install commands failed" >&2; exit 1; }
python=$home/venvs/locks/bin/python
[[ -x $python ]] || { echo "the README's commands made no $python" >&2; exit 1; }

# A server of its own, on a free port.
node --import tsx src/cli.ts serve --port 0 --http-port 0 --log-format json >"$home/server.log" 2>&1 &
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
  echo "check-python-install: the README's Python program $programs, against $address:"
  output=$(cd "$home" && HOME=$home LOCKSTREAM_SERVER=$address "$python" "$file" 2>&1) ||
    { printf '%s\n' "$output" >&2; echo "check-python-install: program $programs failed" >&2; exit 1; }
  sed 's/^/  /' <<<"$output"
  grep -q 'fencing token [0-9][0-9]*' <<<"$output" ||
    { echo "check-python-install: program $programs printed no fencing token" >&2; exit 1; }
done < <(block python | awk '$0 == "@@end" { printf "%s%c", text, 0; text = ""; next } { text = text $0 "\n" }')
[[ $programs -gt 0 ]] || { echo "README.md's Python section has no program" >&2; exit 1; }

installed=$(cd "$home" && "$python" -c 'import lockstream; print(lockstream.__file__)')
[[ $installed == "$home"/* ]] || { echo "lockstream was imported from $installed, not the new virtualenv" >&2; exit 1; }
echo "check-python-install: ok ($programs programs; lockstream from $installed)"
