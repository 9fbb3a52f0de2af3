#!/usr/bin/env bash
# Installs what the integration tests need beyond node_modules, if it is missing:
#   - Apache ZooKeeper from Debian's "zookeeper" package (pulls in a Java runtime and the jars in
#     /usr/share/java that test/setup/zookeeper-process.ts runs directly);
#   - grpcurl, via `go install`.
# Idempotent: prints one line per dependency, found or installed, and nothing else when all is
# already in place.
set -euo pipefail

# Newest 1.9.x on the Go module proxy when this was written
# (`go list -m -versions github.com/fullstorydev/grpcurl` → ... v1.9.3 v1.9.4).
GRPCURL_VERSION="${GRPCURL_VERSION:-v1.9.4}"
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

zookeeper_version() {
  dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo unknown
}

install_zookeeper() {
  if [[ -e $ZK_SERVER_SCRIPT ]]; then
    log "zookeeper: found $(zookeeper_version) ($ZK_SERVER_SCRIPT)"
    return
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "zookeeper is missing and there is no apt-get: install ZooKeeper yourself and set" \
      "LOCKSTREAM_ZK_CLASSPATH (see test/setup/zookeeper-process.ts)"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
  [[ -e $ZK_SERVER_SCRIPT ]] ||
    die "apt-get installed zookeeper but $ZK_SERVER_SCRIPT is still missing"
  log "zookeeper: installed $(zookeeper_version) ($ZK_SERVER_SCRIPT)"
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

install_zookeeper
check_java
install_grpcurl
