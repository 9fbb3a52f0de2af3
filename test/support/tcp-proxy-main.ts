// The process behind TcpProxyProcess: one TcpProxy, commanded over IPC.
import { TcpProxy } from './tcp-proxy.js';

const target = process.argv[2];
if (!target || !process.send)
  throw new Error('usage: fork tcp-proxy-main.ts <host:port> with an IPC channel');
const send = process.send.bind(process);
const proxy = await TcpProxy.start(target);

process.on('message', (message: { id: number; op: string; arg?: string }) => {
  const { id, op, arg } = message;
  const run = async (): Promise<void> => {
    switch (op) {
      case 'holdReplies':
        return proxy.holdReplies();
      case 'heldReplyContaining':
        return proxy.heldReplyContaining(arg ?? '');
      case 'freeze':
        return proxy.freeze();
      case 'thaw':
        return proxy.thaw();
      case 'severAll':
        return proxy.severAll();
      case 'cutIdleAfter':
        return proxy.cutIdleAfter(Number(arg));
      default:
        throw new Error(`unknown proxy operation ${op}`);
    }
  };
  run().then(
    () => send({ id }),
    (error: unknown) => send({ id, error: String(error) }),
  );
});
// Never outlive the test process that drives it.
process.once('disconnect', () => process.exit(0));
process.once('SIGTERM', () => {
  void proxy.close().then(() => process.exit(0));
});
send({ address: proxy.address });
