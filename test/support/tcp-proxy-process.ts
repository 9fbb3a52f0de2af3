import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

type Operation = 'holdReplies' | 'heldReplyContaining' | 'freeze' | 'thaw' | 'severAll' | 'cutIdleAfter';

interface Reply {
  readonly id?: number;
  readonly address?: string;
  readonly error?: string;
}

const MAIN = fileURLToPath(new URL('./tcp-proxy-main.ts', import.meta.url));

/**
 * A TcpProxy (see tcp-proxy.ts) running in a process of its own, driven over IPC. It must not
 * share an event loop with what it sits in front of: the ZooKeeper C client blocks its thread
 * for up to 1.5 s while closing a session (`wait_for_session_to_be_closed`), and an in-process
 * proxy could not forward the reply it waits for. Every method resolves once the proxy has done it.
 */
export class TcpProxyProcess {
  readonly #child: ChildProcess;
  readonly address: string;
  readonly #pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  #lastId = 0;

  private constructor(child: ChildProcess, address: string) {
    this.#child = child;
    this.address = address;
    child.on('message', (reply: Reply) => {
      const pending = reply.id === undefined ? undefined : this.#pending.get(reply.id);
      if (!pending || reply.id === undefined) return;
      this.#pending.delete(reply.id);
      if (reply.error) pending.reject(new Error(reply.error));
      else pending.resolve();
    });
  }

  /** Starts a proxy process in front of `target` (`host:port`); resolves once it listens. */
  static async start(target: string): Promise<TcpProxyProcess> {
    const child = fork(MAIN, [target], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const [ready] = (await once(child, 'message')) as [Reply];
    if (!ready.address) throw new Error('INVARIANT: the proxy process did not say where it listens');
    return new TcpProxyProcess(child, ready.address);
  }

  holdReplies(): Promise<void> {
    return this.#do('holdReplies');
  }

  heldReplyContaining(text: string): Promise<void> {
    return this.#do('heldReplyContaining', text);
  }

  freeze(): Promise<void> {
    return this.#do('freeze');
  }

  thaw(): Promise<void> {
    return this.#do('thaw');
  }

  severAll(): Promise<void> {
    return this.#do('severAll');
  }

  cutIdleAfter(ms: number): Promise<void> {
    return this.#do('cutIdleAfter', String(ms));
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = once(this.#child, 'exit');
    this.#child.kill('SIGTERM');
    await exited;
  }

  #do(op: Operation, arg?: string): Promise<void> {
    const id = ++this.#lastId;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#child.send({ id, op, arg });
    });
  }
}
