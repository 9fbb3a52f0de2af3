#!/usr/bin/env bash
# The checker's own checks, for CI: formatting, vet, and the tests (hand-written histories that
# must pass or fail, and a generated large history timed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -count=1 -v ./...
