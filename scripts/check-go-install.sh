#!/usr/bin/env bash
# Follows docs/go.md as a user outside this repository would: a new directory outside the
# clone, its first program as main.go, its commands run as written (LOCKSTREAM set to this
# clone; the server address replaced by the one of a server started here), then go vet; the
# program's output must show its locks taken and its record written. Then the README's Go
# program in the same module, run the same way. The blocks are those marked
# `<!-- checked by scripts/check-go-install.sh: NAME -->` (test/support/doc-blocks.ts).
# Needs Go, node and the repository built (`npm ci` builds it); the network only for the Go module proxy.
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

# The body of the code block of FILE marked `<!-- checked by scripts/check-go-install.sh: NAME -->`.
marked() {
  awk -v mark="<!-- checked by scripts/check-go-install.sh: $2 -->" '
    $0 == mark { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```$/ { exit }
    found == 2 { print }' "$1"
}
program=$(marked docs/go.md go-program)
commands=$(marked docs/go.md go-commands)
readme_program=$(marked README.md readme-go)
[[ $program == "package main"* ]] || fail "docs/go.md has no Go program (a go-program block with package main)"
[[ $readme_program == "package main"* ]] || fail "README.md has no Go program (a readme-go block with package main)"
[[ $commands == *"go run . 127.0.0.1:50051" ]] || fail "docs/go.md's commands do not end with 'go run . 127.0.0.1:50051'"

# As the quick start starts it (`npm start` runs `node dist/cli.js serve`), on a free port.
node dist/cli.js serve --port 0 --log-format json >"$WORK/server.log" 2>&1 &
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
grep -q '^run 1 recorded at revision 1$' <<<"$output" || fail "the program did not write its guarded record"
grep -q '^rebuilding the cache with token [0-9]' <<<"$output" || fail "the program did not take cache/rebuild"
echo "check-go-install: docs/go.md's program builds and runs from $WORK/app"

# The README's program: the same module, its own main.go, the address given in its source.
printf '%s\n' "${readme_program//127.0.0.1:50051/$address}" >main.go
go vet ./...
output=$(go run .)
printf '%s\n' "$output"
grep -q '^issuing invoices with fencing token [0-9]' <<<"$output" || fail "the README's program did not hold billing/invoices"
echo "check-go-install: the README's Go program builds and runs from $WORK/app"
