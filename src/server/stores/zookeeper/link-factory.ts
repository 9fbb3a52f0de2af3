/* Opens links on the chosen ZooKeeper client, loading the native addon only when it is chosen. */
import type * as AddonModule from './addon-link.js';
import type { LinkFactory, ZooKeeperClientKind } from './zookeeper-link.js';

/**
 * How to open links on `client`. The addon is loaded only when chosen: it is a native,
 * optional dependency, and the protocol client needs no compiler.
 */
export async function linkFactory(client: ZooKeeperClientKind): Promise<LinkFactory> {
  if (client === 'addon') {
    let addon: typeof AddonModule;
    try {
      addon = await import('./addon-link.js');
    } catch (error) {
      throw new Error(
        '--zookeeper-client addon needs the native `zookeeper` package, which is not installed or did not ' +
          'build: run `npm install zookeeper` (it compiles against the Node.js headers with a C compiler), ' +
          'or use the default client (--zookeeper-client protocol), which needs no native build',
        { cause: error },
      );
    }
    const { AddonLink } = addon;
    return (options, events) => new AddonLink(options, events);
  }
  const { ProtocolLink } = await import('./protocol-link.js');
  return (options, events) => new ProtocolLink(options, events);
}
