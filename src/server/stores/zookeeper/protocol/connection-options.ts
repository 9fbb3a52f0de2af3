/* What a protocol connection is opened with, and the parsing of a connect string. */
/** What a ZooKeeperConnection is opened with. */
export interface ZooKeeperConnectionOptions {
  /** Ensemble members as host:port, tried in order after a shuffle-free start at the first. */
  readonly servers: readonly string[];
  readonly sessionTimeoutMs: number;
  /** Credentials sent right after every connect (scheme `digest`: "user:password"). */
  readonly auth?: ReadonlyArray<{ readonly scheme: string; readonly credentials: string }>;
  /** Attach to this existing session instead of creating one (fault-injection tests close it). */
  readonly session?: { readonly id: bigint; readonly password: Uint8Array };
  /**
   * A path every path of this connection is relative to, as in a connect string's
   * `host:port/chroot`: sent prefixed, answered (created paths, watch events) without it.
   */
  readonly chroot?: string;
}

/** `host:port[,host:port...][/chroot]` as servers and chroot. */
export function parseConnectString(connectString: string): { servers: string[]; chroot?: string } {
  const slash = connectString.indexOf('/');
  const hosts = slash === -1 ? connectString : connectString.slice(0, slash);
  const chroot = slash === -1 ? '' : connectString.slice(slash).replace(/\/+$/, '');
  const servers = hosts.split(',').filter((server) => server.length > 0);
  return chroot === '' ? { servers } : { servers, chroot };
}
