#!/usr/bin/env bash
# Installs what the integration tests need beyond node_modules, if it is missing:
#   - Apache ZooKeeper from Debian's "zookeeper" package (pulls in a Java runtime and the jars in
#     /usr/share/java that test/setup/zookeeper-process.ts runs directly);
#   - grpcurl, via `go install`;
#   - protoc-gen-go and protoc-gen-go-grpc, via `go install`, at the versions that
#     scripts/gen-polyglot.sh checks (it makes the Go stubs in gen/go with them);
#   - the Python virtualenv .venv with examples/python/requirements.txt (grpc_tools.protoc for
#     gen/python, grpcio for examples/python) and clients/python/requirements-dev.txt (build,
#     mypy, pytest for the Python client), with python3-venv from Debian if venv is missing;
#   - staticcheck, via `go install`, for the Go client (clients/go);
#   - the Go example, built to .tmp/bin/lockstream-example-go for the tests to run directly;
#   - Chromium from Debian's "chromium" package, which test/integration/page.test.ts drives
#     headless through playwright-core (an npm dev dependency that downloads no browser);
#   - iproute2, iptables and libfaketime from Debian, for the partition and clock faults of
#     test/jepsen (network namespaces, links cut inside them, a server's wall clock stepped);
#   - Apache Curator from Debian's "libcurator-recipes-java" package and etcd from Debian's
#     "etcd-server" package, the comparison rows of `npm run bench` (its smoke run is part of CI).
#   - PostgreSQL from Debian's "postgresql" package, for lockstream/fencing/postgres's tests and
#     the partition suite's records workload: only its binaries (/usr/lib/postgresql/<version>/bin,
#     psql among them) and its "postgres" user are used; test/setup/postgres-process.ts runs a
#     private cluster per test file (or per run, on a test host of its own) as that user.
# Idempotent: prints one line per dependency, found or installed, and nothing else when all is
# already in place.
set -euo pipefail

# Newest 1.9.x on the Go module proxy when this was written
# (`go list -m -versions github.com/fullstorydev/grpcurl` → ... v1.9.3 v1.9.4).
GRPCURL_VERSION="${GRPCURL_VERSION:-v1.9.4}"
# Newest on the Go module proxy when this was written; scripts/gen-polyglot.sh refuses others, as
# the generated code names the plugin versions.
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
# staticcheck 2026.2.2, the first release that knows Go 1.26 here.
STATICCHECK_VERSION=v0.8.2
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=$REPO/.venv
PY_REQUIREMENTS=$REPO/examples/python/requirements.txt
PY_DEV_REQUIREMENTS=$REPO/clients/python/requirements-dev.txt
# Holds the sha256 of the requirements files that .venv was last installed from.
PY_STAMP=$VENV/.requirements.sha256
GO_EXAMPLE_BIN=$REPO/.tmp/bin/lockstream-example-go
ZK_SERVER_SCRIPT=/usr/share/zookeeper/bin/zkServer.sh

log() { printf 'install-test-deps: %s\n' "$*"; }
die() { printf 'install-test-deps: error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

package_version() {
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown
}

# ensure_package NAME PACKAGE FILE HINT: installs Debian's PACKAGE unless FILE exists; HINT says
# what to do where there is no apt-get.
ensure_package() {
  local name=$1 package=$2 file=$3 hint=$4
  if [[ -e $file ]]; then
    log "$name: found $(package_version "$package") ($file)"
    return
  fi
  command -v apt-get >/dev/null 2>&1 || die "$name is missing and there is no apt-get: $hint"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "$package" >/dev/null
  [[ -e $file ]] || die "apt-get installed $package but $file is still missing"
  log "$name: installed $(package_version "$package") ($file)"
}

install_zookeeper() {
  ensure_package zookeeper zookeeper "$ZK_SERVER_SCRIPT" \
    "install ZooKeeper yourself and set LOCKSTREAM_ZK_CLASSPATH (see test/setup/zookeeper-process.ts)"
}

install_chromium() {
  ensure_package chromium chromium /usr/bin/chromium "install Chromium at /usr/bin/chromium"
}

install_curator() {
  # bench/curator/build.sh compiles the Curator load program: it needs a JDK, not only a JRE.
  local javac
  javac=$(command -v javac || true)
  if [[ -n $javac ]]; then
    log "javac: found $("$javac" -version 2>&1) ($javac)"
  else
    ensure_package javac default-jdk-headless /usr/bin/javac "install a JDK"
  fi
  ensure_package curator libcurator-recipes-java /usr/share/java/curator-recipes.jar \
    "install Apache Curator's jars in /usr/share/java"
}

install_fault_tools() {
  # The partition suite (test/jepsen) gives each process its own network namespace (iproute2's
  # `ip netns`) and cuts links with iptables inside them; its clock nemesis steps a server's wall
  # clock with libfaketime (FAKETIME_DONT_FAKE_MONOTONIC=1 leaves the monotonic clock alone).
  ensure_package ip iproute2 /usr/sbin/ip "install iproute2 (ip netns)"
  ensure_package iptables iptables /usr/sbin/iptables "install iptables"
  ensure_package libfaketime libfaketime /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 \
    "install libfaketime"
}

install_etcd() {
  # Only the binary: bench/etcd/etcd-process.ts runs a private etcd on its own ports and data dir.
  ensure_package etcd etcd-server /usr/bin/etcd "install etcd 3.4 at /usr/bin/etcd"
}

# The newest /usr/lib/postgresql/<version>/bin with initdb and postgres, or nothing.
postgres_bin_dir() {
  local dir
  while IFS= read -r dir; do
    if [[ -x $dir/initdb && -x $dir/postgres ]]; then
      printf '%s' "$dir"
      return
    fi
  done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r)
}

install_postgresql() {
  local bin
  bin=$(postgres_bin_dir)
  # The package creates the "postgres" user: PostgreSQL refuses to run as root, so tests run as root
  # start their cluster as that user.
  if [[ -n $bin ]] && id postgres >/dev/null 2>&1; then
    log "postgresql: found $(package_version postgresql) ($bin)"
    return
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "PostgreSQL is missing and there is no apt-get: install it and set LOCKSTREAM_PG_BINDIR"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  # Debian's postinst also creates (and, where services may start, starts) a "main" cluster on
  # port 5432; the tests leave it alone.
  as_root apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  bin=$(postgres_bin_dir)
  [[ -n $bin ]] || die "apt-get installed postgresql but /usr/lib/postgresql/*/bin/initdb is still missing"
  id postgres >/dev/null 2>&1 || die "apt-get installed postgresql but there is no postgres user"
  log "postgresql: installed $(package_version postgresql) ($bin)"
}

check_java() {
  local java
  java=$(command -v java || true)
  [[ -n $java ]] || die "java is not on PATH (the zookeeper package should have pulled in a JRE)"
  log "java: found $("$java" -version 2>&1 | head -n 1) ($java)"
}

# `go install` builds of grpcurl report "dev build <no version set>" (releases set the version
# with -ldflags), so read the module version from the binary's build info when possible.
grpcurl_version() {
  local version=""
  if command -v go >/dev/null 2>&1; then
    version=$(go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }' || true)
  fi
  [[ -n $version ]] || version=$("$1" -version 2>&1 | head -n 1)
  printf '%s' "$version"
}

install_grpcurl() {
  local existing
  existing=$(command -v grpcurl || true)
  if [[ -z $existing ]] && command -v go >/dev/null 2>&1; then
    local gobin
    gobin=$(go env GOBIN)
    [[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
    [[ -x $gobin/grpcurl ]] && existing=$gobin/grpcurl
  fi
  if [[ -n $existing ]]; then
    log "grpcurl: found $(grpcurl_version "$existing") ($existing)"
    return
  fi

  command -v go >/dev/null 2>&1 || die "grpcurl is missing and go is not installed to build it"
  # -mod=mod: never let a vendor directory or go.mod in the current directory get in the way.
  local output
  local module=github.com/fullstorydev/grpcurl/cmd/grpcurl@${GRPCURL_VERSION}
  if ! output=$(GOFLAGS=-mod=mod go install "$module" 2>&1); then
    printf '%s\n' "$output" >&2
    die "go install grpcurl@${GRPCURL_VERSION} failed"
  fi
  local gobin
  gobin=$(go env GOBIN)
  [[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
  [[ -x $gobin/grpcurl ]] || die "go install finished but $gobin/grpcurl is missing"
  local hint=""
  [[ $(command -v grpcurl || true) == "$gobin/grpcurl" ]] || hint=" (not on PATH: add $gobin)"
  log "grpcurl: installed $(grpcurl_version "$gobin/grpcurl") ($gobin/grpcurl)$hint"
}

go_bin_dir() {
  local gobin
  gobin=$(go env GOBIN)
  [[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
  printf '%s' "$gobin"
}

# The main module's version from a Go binary's build info, or nothing.
go_module_version() {
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }' || true
}

# install_go_plugin NAME PACKAGE VERSION: `go install PACKAGE@VERSION` unless GOBIN has NAME at
# VERSION already.
install_go_plugin() {
  local name=$1 package=$2 version=$3
  command -v go >/dev/null 2>&1 || die "$name is missing and go is not installed to build it"
  local gobin existing
  gobin=$(go_bin_dir)
  if [[ -x $gobin/$name ]]; then
    existing=$(go_module_version "$gobin/$name")
    if [[ $existing == "$version" ]]; then
      log "$name: found $existing ($gobin/$name)"
      return
    fi
  fi
  local output
  if ! output=$(GOFLAGS=-mod=mod go install "$package@$version" 2>&1); then
    printf '%s\n' "$output" >&2
    die "go install $package@$version failed"
  fi
  [[ -x $gobin/$name ]] || die "go install finished but $gobin/$name is missing"
  log "$name: installed $(go_module_version "$gobin/$name")${existing:+ (was $existing)} ($gobin/$name)"
}

python_venv_versions() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m
print(", ".join(f"{p} {m.version(p)}" for p in ("grpcio-tools", "grpcio", "protobuf")))
PY
}

# .venv with examples/python/requirements.txt, skipped when the stamp shows it was installed from
# this very file and its python still imports the packages. These are the steps docs/grpcurl.md
# gives a reader for the Python examples (its block marked
# `<!-- checked by scripts/install-test-deps.sh: examples-venv -->`), plus the client's dev tools:
# the page must keep saying so.
install_python_venv() {
  local want output shown
  shown=$(awk '$0 == "<!-- checked by scripts/install-test-deps.sh: examples-venv -->" { found = 1; next }
    found == 1 && /^```/ { found = 2; next } found == 2 && /^```$/ { exit } found == 2 { print }' "$REPO/docs/grpcurl.md")
  [[ $shown == $'python3 -m venv .venv\n.venv/bin/pip install -r examples/python/requirements.txt' ]] ||
    die "docs/grpcurl.md's examples-venv steps are not this script's: python3 -m venv .venv, then pip install -r examples/python/requirements.txt"
  want=$(cat "$PY_REQUIREMENTS" "$PY_DEV_REQUIREMENTS" | sha256sum | awk '{ print $1 }')
  if [[ -f $PY_STAMP && $(cat "$PY_STAMP") == "$want" ]] &&
    "$VENV/bin/python" -c 'import grpc, grpc_tools, google.protobuf, build, mypy, pytest' >/dev/null 2>&1; then
    log "python venv: found $(python_venv_versions) ($VENV)"
    return
  fi

  command -v python3 >/dev/null 2>&1 || die "python3 is not installed (needed for $VENV)"
  # Debian's python3 leaves out venv's ensurepip; it comes with the python3-venv package.
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 ||
      die "python3 has no working venv module and there is no apt-get: install python3-venv"
    export DEBIAN_FRONTEND=noninteractive
    if ! output=$({ as_root apt-get update -qq && as_root apt-get install -y -qq \
      --no-install-recommends python3-venv; } 2>&1); then
      printf '%s\n' "$output" >&2
      die "apt-get install python3-venv failed"
    fi
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 ||
      die "apt-get installed python3-venv but python3 still cannot make a virtualenv"
  fi
  # An existing .venv is kept (pip moves it to the pinned versions) unless its python is broken.
  if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
    if ! output=$(python3 -m venv --clear "$VENV" 2>&1); then
      printf '%s\n' "$output" >&2
      die "python3 -m venv $VENV failed"
    fi
  fi
  if ! output=$("$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    -r "$PY_REQUIREMENTS" -r "$PY_DEV_REQUIREMENTS" 2>&1); then
    printf '%s\n' "$output" >&2
    die "pip install -r $PY_REQUIREMENTS -r $PY_DEV_REQUIREMENTS failed"
  fi
  printf '%s\n' "$want" >"$PY_STAMP"
  log "python venv: installed $(python_venv_versions) ($VENV)"
}

# Built every time (the Go build cache makes that quick) so the binary matches the source.
build_go_example() {
  command -v go >/dev/null 2>&1 || die "go is not installed to build examples/go"
  local output
  # -mod=readonly: the committed go.mod and go.sum must be complete.
  if ! output=$(cd "$REPO/examples/go" &&
    GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$GO_EXAMPLE_BIN" ./ 2>&1); then
    printf '%s\n' "$output" >&2
    die "go build in examples/go failed"
  fi
  log "lockstream-example-go: built ($GO_EXAMPLE_BIN)"
}

install_zookeeper
check_java
install_chromium
install_curator
install_etcd
install_postgresql
install_fault_tools
install_grpcurl
install_go_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_go_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc \
  "$PROTOC_GEN_GO_GRPC_VERSION"
install_go_plugin staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION"
install_python_venv
build_go_example
