#!/usr/bin/env bash
# The one command that tests lockstream on a fresh machine (Debian, Node.js 20, Go, root or sudo):
# installs ZooKeeper, PostgreSQL and grpcurl if missing, installs the npm packages from the lock
# file, then runs every check in CI's order (the last, scripts/check-deploy.sh, installs helm,
# hadolint and kubernetes-validate for itself). `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's title, and how long the one before it took (bash's SECONDS since the start).
last=$SECONDS
step() {
  printf '\n== (%ss; %ss in all) %s\n' "$((SECONDS - last))" "$SECONDS" "$*"
  last=$SECONDS
}
trap 'printf "\n== (%ss; %ss in all) done\n" "$((SECONDS - last))" "$SECONDS"' EXIT

step "system dependencies (ZooKeeper, Java, PostgreSQL, grpcurl)"
bash scripts/install-test-deps.sh
# `go install` puts grpcurl in GOPATH/bin, which a fresh shell may not have on PATH.
if command -v go >/dev/null 2>&1; then
  PATH="$PATH:$(go env GOPATH)/bin"
  export PATH
fi

step "npm packages (npm ci: exactly the lock file; builds the native ZooKeeper client)"
# node-gyp builds the addon against the installed Node.js headers instead of downloading them.
if [[ -z ${npm_config_nodedir:-} && -f /usr/include/node/node.h ]]; then
  export npm_config_nodedir=/usr
fi
npm ci --no-audit --no-fund

export CI=true
step "format";          npm run --silent format:check
step "lint";            npm run --silent lint
step "typecheck";       npm run --silent typecheck
step "no import cycles in src/ and test/ (madge), nor in the Python client's package"; npm run --silent check:cycles
step "proto lint";      npm run --silent proto:lint
step "generated code is up to date"; npm run --silent gen:check
step "clients: Go (gofmt, vet, staticcheck, go test -race), Python (wheel, mypy --strict, pytest)"
bash scripts/test-clients.sh
step "the partition suite's checker (Go: gofmt, vet, go test)"
bash test/jepsen/checker/check.sh
step "tests (unit, conformance on both back ends, ZooKeeper integration, grpcurl, client SDK, the three languages together, the client conformance suite against TypeScript, Go and Python)"
# Each test file's duration goes to .tmp/vitest-report.json too (what to look at when CI grows slow).
# vitest.config.ts runs two files at a time, then the partition suite's alone: on two cores a file
# may wait for the CPU about twice as long as alone, so every timeout and event deadline is
# stretched by 2 (test/support/timing.ts: patience only; what a test measures stays as it is).
LOCKSTREAM_TEST_TIME_SCALE=${LOCKSTREAM_TEST_TIME_SCALE:-2} \
  npx vitest run --reporter=default --reporter=json --outputFile.json=.tmp/vitest-report.json
step "benchmark smoke (every workload against every target, briefly; figures are not checked)"
npm run --silent bench:smoke -- --out .tmp/bench-smoke.json
step "packages: @lockstream/client and the server package lockstream, packed and installed outside the clone as docs/typescript.md says; the client install holds no server code"
bash scripts/check-package.sh
step "deployment: Dockerfile (hadolint, its runtime stage started), Helm chart (lint, template, Kubernetes schemas), systemd unit (systemd-analyze)"
bash scripts/check-deploy.sh
