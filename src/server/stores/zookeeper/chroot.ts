/* The chroot of a connect string, and the error start-up gives when it is missing. */
import { LockError } from '../../lock-error.js';

/** The chroot path of a connect string (`host:port,.../chroot`), if it has one. */
export function chrootOf(connectString: string): string | undefined {
  const chroot = /^[^/]*(\/.*)$/.exec(connectString)?.[1];
  return chroot === '/' ? undefined : chroot;
}

/** How start-up says that the chroot of the connect string is missing, and how to fix it. */
export function missingChroot(chroot: string): LockError {
  return new LockError(
    'UNAVAILABLE',
    `the chroot ${chroot} of the ZooKeeper connect string does not exist: create it first (zkCli.sh create ${chroot})`,
  );
}
