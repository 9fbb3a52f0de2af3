import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { LockRpc } from './lock-caller.js';

export interface LockHolderProcess {
  readonly token: bigint;
  readonly pid: number;
  /** Sends the signal and resolves once the process has exited. */
  kill(signal: NodeJS.Signals): Promise<void>;
}

const SCRIPT = fileURLToPath(new URL('./hold-lock.ts', import.meta.url));

/** Starts a client process that acquires `name` (through `rpc`) and holds it; resolves once it holds. */
export async function spawnLockHolder(
  address: string,
  name: string,
  rpc: LockRpc = 'acquire',
): Promise<LockHolderProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', SCRIPT, address, name, rpc], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit');
  const token = await new Promise<bigint>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /acquired (\d+)/.exec(output);
      if (match?.[1]) resolve(BigInt(match[1]));
    });
    void exited.then(() => reject(new Error(`lock holder exited before acquiring:\n${output}`)));
  });
  return {
    token,
    pid: child.pid ?? -1,
    kill: async (signal) => {
      child.kill(signal);
      await exited;
    },
  };
}
