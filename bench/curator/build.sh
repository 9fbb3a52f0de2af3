#!/usr/bin/env bash
# Compiles CuratorBench.java into <outdir> and prints, as the only line on stdout, the classpath
# to run it with:
#
#   cp=$(bash bench/curator/build.sh .tmp/curator-bench)
#   java -cp "$cp" CuratorBench --zookeeper 127.0.0.1:2181 --workload U --prefix run1
#
# Uses Debian's packaged jars under /usr/share/java, by their unversioned names. The runtime
# classpath is exactly what the mutex / read-write lock recipes need with ZooKeeper's default
# (NIO) client socket: Curator recipes + framework + client, ZooKeeper + jute, Guava, the SLF4J
# API, and the SLF4J no-op binding (so nothing is logged, and in particular nothing reaches
# stdout, which is CuratorBench's protocol channel). Netty, Jackson, commons-*, Jetty, metrics,
# snappy are named in the packaged jars' manifests but not loaded by this program.
set -euo pipefail

JAVA_DIR=/usr/share/java
INSTALL_HINT='apt-get install -y libcurator-recipes-java default-jdk-headless'
JARS=(
  curator-recipes
  curator-framework
  curator-client
  zookeeper
  zookeeper-jute
  guava
  slf4j-api
  slf4j-nop
)

die() {
  echo "bench/curator/build.sh: $*" >&2
  exit 1
}

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: bash bench/curator/build.sh <outdir>" >&2
  exit 2
fi
outdir=$1

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$src_dir/CuratorBench.java"
[ -f "$src" ] || die "missing $src"

command -v javac >/dev/null 2>&1 || die "javac not found (need a JDK, 11 or newer). Install with: $INSTALL_HINT"
command -v java >/dev/null 2>&1 || die "java not found. Install with: $INSTALL_HINT"

missing=()
cp_jars=""
for j in "${JARS[@]}"; do
  f="$JAVA_DIR/$j.jar"
  if [ -r "$f" ]; then
    cp_jars="$cp_jars:$f"
  else
    missing+=("$f")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  die "missing jar(s): ${missing[*]}. Install with: $INSTALL_HINT"
fi
cp_jars=${cp_jars#:}

mkdir -p "$outdir" || die "cannot create $outdir"
outdir_abs=$(cd "$outdir" && pwd)

# javac's own output (diagnostics) goes to stderr; stdout carries only the classpath line.
if ! javac -nowarn -encoding UTF-8 -d "$outdir_abs" -cp "$cp_jars" "$src" 1>&2; then
  die "javac failed compiling $src"
fi

echo "$outdir_abs:$cp_jars"
