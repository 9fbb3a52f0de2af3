/**
 * The shared ZooKeeper's connect string. Without one (ZooKeeper not installed, outside CI) the
 * calling test file fails loudly at import, naming the fix: a missing ZooKeeper never passes.
 */
export function requireZooKeeper(connectString: string | null): string {
  if (connectString === null) {
    throw new Error('no ZooKeeper for integration tests: run scripts/install-test-deps.sh');
  }
  return connectString;
}
