#!/usr/bin/env bash
# Regenerates the Go and Python stubs of proto/ (`npm run gen:polyglot`):
#   - gen/go/lockstream/...     buf generate --template buf.gen.polyglot.yaml, with the local
#                               plugins protoc-gen-go and protoc-gen-go-grpc from `go env GOBIN`
#                               (or `go env GOPATH`/bin);
#   - gen/python/lockstream/... grpc_tools.protoc from the virtualenv .venv.
# scripts/install-test-deps.sh installs both toolchains at the versions checked below. Output is
# deterministic: the generated trees are replaced whole (so a removed .proto leaves nothing
# behind), and a plugin at any other version is refused rather than allowed to change the code.
# gen/go/go.mod and gen/go/go.sum are maintained by hand (`go mod tidy` in gen/go).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Keep in step with scripts/install-test-deps.sh and examples/python/requirements.txt.
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

die() { printf 'gen-polyglot: error: %s\n' "$*" >&2; exit 1; }
hint="run scripts/install-test-deps.sh"

# --- Go -----------------------------------------------------------------------------------------
command -v go >/dev/null 2>&1 || die "go is not installed"
gobin=$(go env GOBIN)
[[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"

# `protoc-gen-go --version` prints "protoc-gen-go v1.36.12", protoc-gen-go-grpc "... 1.6.2".
check_plugin() {
  local plugin=$1 want=$2 got
  [[ -x $gobin/$plugin ]] || die "$gobin/$plugin is missing: $hint"
  got=$("$gobin/$plugin" --version 2>/dev/null | awk '{ print $2 }')
  [[ v${got#v} == "$want" ]] || die "$gobin/$plugin is ${got:-of unknown version}, want $want: $hint"
}
check_plugin protoc-gen-go "$PROTOC_GEN_GO_VERSION"
check_plugin protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

buf=$root/node_modules/.bin/buf
[[ -x $buf ]] || die "$buf is missing: run npm ci"

rm -rf gen/go/lockstream
PATH="$gobin:$PATH" "$buf" generate --template buf.gen.polyglot.yaml

# --- Python -------------------------------------------------------------------------------------
python=$root/.venv/bin/python
[[ -x $python ]] || die "$python is missing: $hint"
want=$(sed -n 's/^grpcio-tools==\([^[:space:]]*\).*/\1/p' examples/python/requirements.txt)
got=$("$python" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))' 2>/dev/null || true)
[[ -n $want && $got == "$want" ]] ||
  die ".venv has grpcio-tools ${got:-missing}, examples/python/requirements.txt pins ${want:-nothing}: $hint"

protos=()
while IFS= read -r proto; do protos+=("$proto"); done < <(cd proto && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)

rm -rf gen/python/lockstream
mkdir -p gen/python
# Run as a module, grpc_tools.protoc adds its bundled well-known types (google/protobuf/*.proto)
# to the include path.
"$python" -m grpc_tools.protoc -I proto \
  --python_out=gen/python --pyi_out=gen/python --grpc_python_out=gen/python \
  "${protos[@]}"
