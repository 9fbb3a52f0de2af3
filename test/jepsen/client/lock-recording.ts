/**
 * A lock taken and given back through the SDK, recorded as history lines (test/jepsen/checker's
 * format): the acquire (invoke, then ok with its token, or fail), in_doubt and confirmed while
 * held, lost when told, and the release (invoke, then ok or info). The lock role of
 * recorder-main.ts and the records role (record-increments.ts) hold their locks through it.
 */
import type { LockClient, Lock, LockMode } from '../../../src/client/index.js';

/** How a role writes its history: one line per call, each op numbered within the client. */
export interface Recording {
  record(event: Record<string, unknown>): void;
  nextOp(): number;
}

/** An error as a history line's `error`: `<code>: <message>` when it has a code. */
export function describe(error: unknown): string {
  if (error && typeof error === 'object' && 'code' in error && 'message' in error)
    return `${String((error as { code: unknown }).code)}: ${String((error as { message: unknown }).message)}`;
  return String(error);
}

export interface AcquireRecording {
  readonly mode: LockMode;
  readonly limit?: number | undefined;
  readonly waitTimeout: number;
  /** Aborting it gives a pending acquire up (the recorder was told to stop). */
  readonly signal: AbortSignal;
  /** The planted bug `ignore-lost`: the `lost` line is left to the caller. */
  readonly ignoreLost?: boolean;
}

/** A hold as recorded: its lock, and the release that ends the client's belief in it. */
export class RecordedHold {
  readonly held: Lock;
  readonly #recording: Recording;
  #releasing = false;

  constructor(held: Lock, recording: Recording, ignoreLost: boolean) {
    this.held = held;
    this.#recording = recording;
    held.lost.addEventListener(
      'abort',
      () => {
        if (!this.#releasing && !ignoreLost)
          recording.record({
            op: recording.nextOp(),
            type: 'event',
            f: 'lost',
            lock: held.name,
            error: describe(held.lost.reason),
          });
      },
      { once: true },
    );
  }

  /** Whether the client has asked to release it (a loss told since is not recorded). */
  get releasing(): boolean {
    return this.#releasing;
  }

  /** Releases it: recorded as an invoke, then ok or info. Resolves true if the release returned ok. */
  async release(): Promise<boolean> {
    this.#releasing = true;
    const op = this.#recording.nextOp();
    const lock = this.held.name;
    this.#recording.record({ op, type: 'invoke', f: 'release', lock });
    try {
      await this.held.release();
      this.#recording.record({ op, type: 'ok', f: 'release', lock });
      return true;
    } catch (error) {
      this.#recording.record({ op, type: 'info', f: 'release', lock, error: describe(error) });
      return false;
    }
  }
}

/**
 * Acquires `lock` and records it; resolves with the hold, or undefined when the acquire failed
 * (recorded as `fail`). A `lost` told while held is recorded (unless the hold is being released).
 */
export async function acquireRecorded(
  client: LockClient,
  recording: Recording,
  lock: string,
  options: AcquireRecording,
): Promise<RecordedHold | undefined> {
  const { mode, limit } = options;
  const op = recording.nextOp();
  // The checker knows a mutex as what it is: an exclusive (write) lock.
  const recorded = mode === 'mutex' ? 'write' : mode;
  const shape = { f: 'acquire', lock, mode: recorded, ...(limit === undefined ? {} : { limit }) };
  recording.record({ op, type: 'invoke', ...shape });
  // Told before `acquire` resolves, as after: recorded once the grant is.
  let doubted = false;
  let held: Lock;
  try {
    held = await client.acquire(lock, {
      mode,
      ...(limit === undefined ? {} : { limit }),
      waitTimeout: options.waitTimeout,
      signal: options.signal,
      // Not part of the history: a line on stderr for tests that wait for a queue to form.
      onQueued: (ahead) => process.stderr.write(`queued ${ahead} ${lock}\n`),
      onInDoubt: () => {
        doubted = true;
        recording.record({ op: recording.nextOp(), type: 'event', f: 'in_doubt', lock });
      },
      onConfirmed: () => {
        if (!doubted) return;
        doubted = false;
        recording.record({ op: recording.nextOp(), type: 'event', f: 'confirmed', lock });
      },
    });
  } catch (error) {
    recording.record({ op, type: 'fail', ...shape, error: describe(error) });
    return undefined;
  }
  recording.record({ op, type: 'ok', ...shape, token: held.token.toString() });
  return new RecordedHold(held, recording, options.ignoreLost ?? false);
}
