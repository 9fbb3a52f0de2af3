#!/usr/bin/env bash
# Proves both npm packages work from outside the clone, installed as docs/typescript.md says (the
# blocks marked `<!-- checked by scripts/check-package.sh: NAME -->`, run as written with
# LOCKSTREAM set to this clone), each into an empty project in a temporary directory:
#  - @lockstream/client (typescript-install-client): packed from packages/client and installed;
#    holds no server code and pulls in no server package; every bare import of its files is a
#    declared dependency (scripts/client-package.ts check); test/package/consumer.ts and the
#    README's and docs/typescript.md's examples (examples/typescript/quick-start.ts, tour.ts)
#    type-check against it and run against a server started as the README's quick start says
#    (`npm start`);
#  - lockstream, the server (typescript-install-server): its `lockstream serve` starts from the
#    install, the consumer runs against it, and its `lockstream/client` is @lockstream/client's API.
# Prints each package's tarball size, installed size and package count, and the time taken.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

log() { printf 'check-package: (%ss) %s\n' "$SECONDS" "$*"; }
fail() {
  log "error: $*"
  exit 1
}

# The body of the code block of docs/typescript.md marked `<!-- checked by scripts/check-package.sh: NAME -->`.
marked() {
  local body
  body=$(awk -v mark="<!-- checked by scripts/check-package.sh: $1 -->" '
    $0 == mark { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```$/ { exit }
    found == 2 { print }' "$repo/docs/typescript.md")
  [[ -n $body ]] || fail "docs/typescript.md has no block marked $1"
  printf '%s\n' "$body"
}
export LOCKSTREAM=$repo npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

# An empty ES-module project in $work/$1, and the commands of the block named $2 run in it.
install_as_documented() {
  mkdir "$work/$1"
  cd "$work/$1"
  npm init -y >/dev/null
  npm pkg set type=module
  bash -euo pipefail -c "$(marked "$2")" >install.log 2>&1 || {
    cat install.log
    fail "the commands of docs/typescript.md's $2 failed"
  }
}

# "TARBALL: tarball size, installed size (node_modules), package count" of the project in the
# current directory; the count is every package under node_modules, the installed one included.
sizes() {
  local packages
  packages=$(npm ls --all --parseable | tail -n +2 | sort -u | wc -l)
  printf '%s (tarball %s): %s packages, %s in node_modules' \
    "$1" "$(du -h "$1" | cut -f1)" "$packages" "$(du -sh node_modules | cut -f1)"
}

# Runs "$@" in its own process group (logs in $work/$name.log); sets `address` once it listens.
start_server() {
  local name=$1 log
  shift
  log="$work/$name.log"
  : >"$log"
  LOCKSTREAM_LOG_FORMAT=json setsid "$@" >"$log" 2>&1 &
  servers+=("$!")
  address=""
  for _ in $(seq 1 300); do
    address=$(grep -o 'lockstream listening on [0-9.:]*' "$log" | head -n 1 | sed 's/.* on //' || true)
    [[ -n $address ]] && return
    kill -0 "${servers[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log"
  fail "$name did not start"
}

# 1. The client package.
install_as_documented client typescript-install-client
client_tarball=$(ls lockstream-client-*.tgz)
log "installed $(sizes "$client_tarball"), as docs/typescript.md says"
installed=node_modules/@lockstream/client
server_only=(pino pino-pretty commander prom-client @grpc/reflection grpc-health-check yaml zod ms zookeeper pg lockstream)
for name in "${server_only[@]}"; do
  [[ ! -e node_modules/$name ]] || fail "installing @lockstream/client pulled in $name"
done
(cd "$repo" && node --import tsx scripts/client-package.ts check "$work/client/$installed") >check.log 2>&1 ||
  {
    cat check.log
    fail "the installed @lockstream/client does not hold"
  }
log "no server code: no dist/server nor dist/cli in the package; none of ${server_only[*]} in node_modules; $(cat check.log)"

typescript=$(node -p "require('$repo/node_modules/typescript/package.json').version")
types_node=$(node -p "require('$repo/node_modules/@types/node/package.json').version")
npm install --silent --no-save "typescript@$typescript" "@types/node@$types_node"
cp "$repo/test/package/consumer.ts" .
# The README's and docs/typescript.md's examples, as a user copies them into a project of their own.
examples=(quick-start tour)
for example in "${examples[@]}"; do cp "$repo/examples/typescript/$example.ts" .; done
cat >tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022", "ESNext.Disposable"],
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "strict": true,
    "skipLibCheck": false,
    "outDir": "out"
  },
  "files": ["consumer.ts", "quick-start.ts", "tour.ts"]
}
JSON
npx tsc -p .
log "consumer.ts and the examples ${examples[*]} type-check against @lockstream/client's declarations"

# The README's quick start (`npm start` in the clone), on a free port rather than 50051.
start_server quick-start bash -c "cd '$repo' && exec npm start --silent -- --port 0"
log "the quick start's server ('npm start') listens on $address"
node out/consumer.js "$address" >consumer.log
log "consumer.js ran against it: $(tail -n 1 consumer.log)"
for example in "${examples[@]}"; do
  LOCKSTREAM_SERVER=$address node "out/$example.js" >"$example.log" 2>&1 || {
    cat "$example.log"
    fail "examples/typescript/$example.ts failed from the installed package"
  }
done
grep -q '^issuing invoices with fencing token [0-9][0-9]*$' quick-start.log || fail "quick-start.ts printed no token"
grep -q '^charged inv-42 with token [0-9][0-9]*$' tour.log || fail "tour.ts did not charge inv-42"
log "the README's and docs/typescript.md's examples (${examples[*]}) ran against it from the installed package"

# 2. The server package: `lockstream serve` from its install, and the same client API.
install_as_documented server typescript-install-server
log "installed $(sizes lockstream-0.1.0.tgz), as docs/typescript.md says"
start_server server-package npx --no-install lockstream serve --port 0
log "the installed 'lockstream serve' listens on $address"
node "$work/client/out/consumer.js" "$address" >consumer.log
log "consumer.js ran against it: $(tail -n 1 consumer.log)"
exports_of() { node -e "import('$1').then((m) => console.log(Object.keys(m).sort().join(' ')))"; }
server_api=$(exports_of lockstream/client)
client_api=$(cd "$work/client" && exports_of @lockstream/client)
[[ $server_api == "$client_api" ]] || fail "lockstream/client exports $server_api; @lockstream/client exports $client_api"
log "lockstream/client and @lockstream/client export the same: $client_api"
log "ok"
