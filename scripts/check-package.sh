#!/usr/bin/env bash
# Proves lockstream works as a package: `npm pack`, install the tarball into an empty project,
# type-check and run test/package/consumer.ts against `lockstream serve` from that install, and
# check that a client-only install did not pull in the native ZooKeeper addon nor pg.
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

tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
log "packed $tarball ($(du -h "$work/$tarball" | cut -f1))"

mkdir "$work/consumer"
cd "$work/consumer"
npm init -y >/dev/null
npm pkg set type=module
typescript=$(node -p "require('$repo/node_modules/typescript/package.json').version")
types_node=$(node -p "require('$repo/node_modules/@types/node/package.json').version")
npm install --no-audit --no-fund --silent "$work/$tarball" "typescript@$typescript" "@types/node@$types_node"
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
