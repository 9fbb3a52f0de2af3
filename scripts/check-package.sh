#!/usr/bin/env bash
# Proves lockstream works as a package: `npm pack`, install the tarball into an empty project,
# type-check and run test/package/consumer.ts against `lockstream serve` from that install, and
# check that a client-only install did not pull in the native ZooKeeper addon nor pg. The
# install commands are docs/typescript.md's, run as written (the blocks marked
# `<!-- checked by scripts/check-package.sh: typescript-install-tarball -->` and
# `typescript-install-path`), with LOCKSTREAM set to this clone.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

log() { printf 'check-package: %s\n' "$*"; }

# The body of the code block of docs/typescript.md marked `<!-- checked by scripts/check-package.sh: NAME -->`.
marked() {
  awk -v mark="<!-- checked by scripts/check-package.sh: $1 -->" '
    $0 == mark { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```$/ { exit }
    found == 2 { print }' "$repo/docs/typescript.md"
}
export LOCKSTREAM=$repo npm_config_audit=false npm_config_fund=false

# By path: npm links the clone.
mkdir "$work/by-path"
cd "$work/by-path"
npm init -y >/dev/null
npm pkg set type=module
bash -euo pipefail -c "$(marked typescript-install-path)" >/dev/null
node -e "import('lockstream/client').then((m) => { if (typeof m.LockClient !== 'function') process.exit(1); })"
log "installed by path as docs/typescript.md says; lockstream/client imports"

# From a tarball: a copy of its own.
mkdir "$work/consumer"
cd "$work/consumer"
npm init -y >/dev/null
npm pkg set type=module
bash -euo pipefail -c "$(marked typescript-install-tarball)" >/dev/null
tarball=$(ls lockstream-*.tgz)
log "packed and installed $tarball ($(du -h "$tarball" | cut -f1)) as docs/typescript.md says"
typescript=$(node -p "require('$repo/node_modules/typescript/package.json').version")
types_node=$(node -p "require('$repo/node_modules/@types/node/package.json').version")
npm install --silent "typescript@$typescript" "@types/node@$types_node"
if [[ -e node_modules/zookeeper ]]; then
  log "error: a client-only install pulled in the native zookeeper package"
  exit 1
fi
if [[ -e node_modules/pg ]]; then
  log "error: a client-only install pulled in pg (an optional peer dependency of lockstream/fencing/postgres)"
  exit 1
fi
log "installed into an empty project; node_modules/zookeeper and node_modules/pg absent"

cp "$repo/test/package/consumer.ts" .
cat > tsconfig.json <<'JSON'
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
  "files": ["consumer.ts"]
}
JSON
npx tsc -p .
log "consumer.ts type-checks against the installed declarations"

# The installed package's own server, on the embedded store (no zookeeper package needed).
node_modules/.bin/lockstream serve --port 0 >server.log 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*"port":\([0-9]*\).*lockstream listening.*/\1/p' server.log | head -n 1)
  [[ -n $port ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat server.log; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { log "error: the installed lockstream serve did not start"; cat server.log; exit 1; }
log "installed 'lockstream serve' listens on 127.0.0.1:$port"
node out/consumer.js "127.0.0.1:$port"
log "ok"
