/* A protocol connection's chroot: paths sent under it and answered without it. */
/**
 * A connection's chroot, as in a connect string's `host:port/chroot`: every path is sent
 * under it and answered (created paths, watch events) without it.
 */
export class Chroot {
  /** `''` for none. */
  constructor(readonly root: string) {}

  /** A path as the server knows it: under the chroot. */
  serverPath(path: string): string {
    if (this.root === '') return path;
    return path === '/' ? this.root : this.root + path;
  }

  /** A path the server sent, as the caller knows it: without the chroot. */
  clientPath(path: string): string {
    if (this.root === '' || !path.startsWith(this.root)) return path;
    return path.length === this.root.length ? '/' : path.slice(this.root.length);
  }
}
