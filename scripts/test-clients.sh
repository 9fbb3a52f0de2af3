#!/usr/bin/env bash
# Checks the Go and Python clients (scripts/test.sh runs it after `npm ci`: their tests start
# lockstream servers from this repository). Needs what scripts/install-test-deps.sh installs.
#   clients/go:     gofmt, go vet, staticcheck, go test -race, and the README's Go section
#                   followed from a module outside the repository (scripts/check-go-install.sh)
#   clients/python: python -m build (sdist and wheel), the wheel installed into .venv (the
#                   cross-language test in test/integration/interop.test.ts and the client
#                   conformance suite in test/clients use it), mypy --strict, pytest against
#                   the installed wheel; then the README's install and programs from outside
#                   the repository (scripts/check-python-install.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PATH="$PATH:$(go env GOPATH)/bin"

(
  cd clients/go
  unformatted=$(gofmt -l .)
  [[ -z $unformatted ]] || { printf 'gofmt: not formatted:\n%s\n' "$unformatted" >&2; exit 1; }
  GOFLAGS=-mod=readonly go vet ./...
  GOFLAGS=-mod=readonly staticcheck ./...
  GOFLAGS=-mod=readonly go test -race -count=1 ./...
)
bash scripts/check-go-install.sh

(
  cd clients/python
  rm -rf dist
  "$REPO/.venv/bin/python" -m build
  "$REPO/.venv/bin/python" -m pip install --disable-pip-version-check -q --force-reinstall --no-deps dist/*.whl
  # The wheel's dependencies (grpcio, protobuf) are met by what .venv has.
  "$REPO/.venv/bin/python" -m pip check
  "$REPO/.venv/bin/mypy" src/lockstream hatch_build.py scripts/check_cycles.py
  cd tests
  "$REPO/.venv/bin/python" -m pytest -c ../pyproject.toml --rootdir .. -q
)

bash scripts/check-python-install.sh
