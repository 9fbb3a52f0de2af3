#!/usr/bin/env bash
# Follows the README's "From Go" section as a user outside this repository would: a new
# directory outside the clone, the section's program as main.go, the section's commands run as
# written (LOCKSTREAM set to this clone; the server address replaced by the one of a server
# started here), then go vet; the program's output must show both of its locks taken.
# Needs Go, node and the repository's node_modules; the network only for the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "check-go-install: $*" >&2
  exit 1
}

# The section runs from its heading to the next one; its first go and sh blocks are the
# program and the commands.
section=$(awk '/^## From Go$/ { on = 1; next } on && /^## / { exit } on' README.md)
block() { awk -v fence="^\`\`\`$1\$" '$0 ~ fence { on = 1; next } on && /^```$/ { exit } on' <<<"$section"; }
program=$(block go)
commands=$(block sh)
[[ $program == "package main"* ]] || fail "no Go program (a go block with package main) in the README's Go section"
[[ $commands == *"go run . 127.0.0.1:50051"* ]] || fail "the README's Go commands do not end with 'go run . 127.0.0.1:50051'"

# A server from this clone, on a free port.
node --import tsx src/cli.ts serve --port 0 --log-format json >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
address=
for _ in $(seq 600); do
  address=$(grep -o '"msg":"lockstream listening on [^"]*"' "$WORK/server.log" | sed 's/.* on //; s/"$//' || true)
  [[ -n $address ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited: $(cat "$WORK/server.log")"
  sleep 0.1
done
[[ -n $address ]] || fail "the server did not start within 60s"

mkdir "$WORK/app"
cd "$WORK/app"
printf '%s\n' "$program" >main.go
# Outside any workspace, as a user's module.
export GOWORK=off LOCKSTREAM=$REPO
output=$(bash -euo pipefail -c "${commands//127.0.0.1:50051/$address}")
go vet ./...
printf '%s\n' "$output"
grep -q '^issuing invoices with token [0-9]' <<<"$output" || fail "the program did not hold billing/invoices"
grep -q '^rebuilding the cache with token [0-9]' <<<"$output" || fail "the program did not take cache/rebuild"
echo "check-go-install: the README's Go section builds and runs from $WORK/app"
