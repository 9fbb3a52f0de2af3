/**
 * A TCP proxy that delays every byte by a set time, run inside a test host: the `delay`
 * nemesis's stand-in for netem, which this machine's kernel lacks. Each `<port>=<host>:<port>`
 * argument listens on 127.0.0.1:<port> and forwards to the target; a line `delay <ms>` on stdin
 * sets the one-way delay of both directions of every connection from then on (0: none). Bytes
 * keep their order: a chunk is never due before the one ahead of it. Prints `ready` once every
 * port listens.
 *
 *   delay-proxy-main.ts 6001=198.18.0.4:50051 [6002=198.18.0.5:50051 ...]
 */
import net from 'node:net';
import { createInterface } from 'node:readline';

let delayMs = 0;

/** Forwards `from` to `to`, each chunk `delayMs` after it came, in order. */
function pipeDelayed(from: net.Socket, to: net.Socket): void {
  const queue: Array<{ dueAt: number; chunk: Buffer }> = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    timer = undefined;
    const now = performance.now();
    while (queue.length > 0 && queue[0]!.dueAt <= now) to.write(queue.shift()!.chunk);
    if (queue.length > 0) timer = setTimeout(flush, queue[0]!.dueAt - now);
  };
  from.on('data', (chunk: Buffer) => {
    if (delayMs === 0 && queue.length === 0) {
      to.write(chunk);
      return;
    }
    const last = queue.at(-1)?.dueAt ?? 0;
    queue.push({ dueAt: Math.max(last, performance.now() + delayMs), chunk });
    timer ??= setTimeout(flush, Math.max(0, queue[0]!.dueAt - performance.now()));
  });
  const end = (): void => {
    clearTimeout(timer);
    to.destroy();
  };
  from.on('close', end);
  from.on('error', end);
}

const listening = process.argv.slice(2).map((spec) => {
  const match = /^(\d+)=(.+):(\d+)$/.exec(spec);
  if (!match) throw new Error(`not <port>=<host>:<port>: ${spec}`);
  const [, port, host, targetPort] = match;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(targetPort), host);
    pipeDelayed(client, upstream);
    pipeDelayed(upstream, client);
  });
  return new Promise<void>((resolve) => server.listen(Number(port), '127.0.0.1', resolve));
});
await Promise.all(listening);

createInterface({ input: process.stdin }).on('line', (line) => {
  const match = /^delay (\d+)$/.exec(line.trim());
  if (match) delayMs = Number(match[1]);
});
// Never outlive the harness that drives it.
process.stdin.on('close', () => process.exit(0));
process.stdout.write('ready\n');
