/**
 * The benchmark's workloads, run the same way against every target: acquire → release in a loop,
 * no hold time.
 *
 * - U: 1 client, 1 mutex, warm-up then `cycles` timed cycles (cycle latency); with
 *   `freshNames`, every cycle on a lock never used before.
 * - H: `clients` clients on 1 mutex for `durationMs` (handoffs/s, wait latency).
 * - P: `clients` clients, each on its own lock, for `durationMs` (cycle latency).
 * - RW: `readers` + `writers` on one lock for `durationMs` (reads/s, writes/s, writer wait).
 *
 * The Java load program (bench/curator/CuratorBench.java) implements the same definitions.
 */

export type LockMode = 'mutex' | 'read' | 'write';

/** One client of a lock service: acquires a lock and hands back how to release it. */
export interface LockSession {
  acquire(name: string, mode: LockMode): Promise<() => Promise<void>>;
}

export type WorkloadName = 'U' | 'H' | 'P' | 'RW';

export interface WorkloadSettings {
  readonly workload: WorkloadName;
  /** Lock names are `<prefix>/u`, `<prefix>/h`, `<prefix>/p-<i>`, `<prefix>/rw`. */
  readonly prefix: string;
  readonly cycles: number;
  readonly warmupCycles: number;
  readonly clients: number;
  readonly readers: number;
  readonly writers: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** U only: every cycle on a new lock name (`<prefix>/u-w<i>` warming up, `<prefix>/u-<i>` timed). */
  readonly freshNames?: boolean;
}

/** What a load process reports for one workload (the same shape from the Java program). */
export interface WorkloadResult {
  readonly workload: WorkloadName;
  /** U: the wall time of the timed cycles. Others: the configured window. */
  readonly durationMs: number;
  /** Grants in the window. */
  readonly acquisitions: number;
  /** Every grant after `go`, including those that drained the queue after the window. */
  readonly allAcquisitions: number;
  readonly reads?: number;
  readonly writes?: number;
  /** U and P: cycle; H: wait (request → held); RW: writer wait. */
  readonly latencyMs: { readonly p50: number; readonly p99: number };
  readonly perClient?: { readonly min: number; readonly max: number };
  /** CPU time (user + system) of the load process from `go` to the last release. */
  readonly cpuMicros: number;
}

interface ClientPlan {
  readonly name: string;
  readonly mode: LockMode;
  /** Which sample to record: the wait for the grant, or the whole cycle. */
  readonly sample: 'wait' | 'cycle' | 'none';
}

/** The clients of a duration workload (everything but U). */
function plans(settings: WorkloadSettings): ClientPlan[] {
  const { prefix } = settings;
  switch (settings.workload) {
    case 'U':
      return [{ name: `${prefix}/u`, mode: 'mutex', sample: 'cycle' }];
    case 'H':
      return Array.from({ length: settings.clients }, () => ({
        name: `${prefix}/h`,
        mode: 'mutex' as const,
        sample: 'wait' as const,
      }));
    case 'P':
      return Array.from({ length: settings.clients }, (_, i) => ({
        name: `${prefix}/p-${i}`,
        mode: 'mutex' as const,
        sample: 'cycle' as const,
      }));
    case 'RW':
      return [
        ...Array.from({ length: settings.readers }, () => ({
          name: `${prefix}/rw`,
          mode: 'read' as const,
          sample: 'none' as const,
        })),
        ...Array.from({ length: settings.writers }, () => ({
          name: `${prefix}/rw`,
          mode: 'write' as const,
          sample: 'wait' as const,
        })),
      ];
  }
}

/** How many clients a workload runs: each gets its own session from the target. */
export function clientCount(settings: WorkloadSettings): number {
  return plans(settings).length;
}

/**
 * Runs one workload on `sessions` (one per client): warms up, calls `ready()` and waits for it,
 * then measures.
 */
export async function runWorkload(
  settings: WorkloadSettings,
  sessions: readonly LockSession[],
  ready: () => Promise<void>,
): Promise<WorkloadResult> {
  const clients = plans(settings);
  if (sessions.length !== clients.length) throw new Error(`need ${clients.length} sessions`);
  if (settings.workload === 'U') {
    const [session] = sessions;
    const [plan] = clients;
    if (!session || !plan) throw new Error('U needs one session');
    const named = (name: string): ClientPlan => (settings.freshNames ? { ...plan, name } : plan);
    for (let i = 0; i < settings.warmupCycles; i += 1) await cycle(session, named(`${plan.name}-w${i}`));
    await ready();
    const cpu = process.cpuUsage();
    const samples = new Float64Array(settings.cycles);
    const start = performance.now();
    for (let i = 0; i < settings.cycles; i += 1) {
      const begun = performance.now();
      await cycle(session, named(`${plan.name}-${i}`));
      samples[i] = performance.now() - begun;
    }
    const durationMs = performance.now() - start;
    return {
      workload: 'U',
      durationMs,
      acquisitions: settings.cycles,
      allAcquisitions: settings.cycles,
      latencyMs: percentiles(samples),
      cpuMicros: cpuSince(cpu),
    };
  }
  await loop(sessions, clients, settings.warmupMs);
  await ready();
  const cpu = process.cpuUsage();
  const outcome = await loop(sessions, clients, settings.durationMs);
  const result: WorkloadResult = {
    workload: settings.workload,
    durationMs: settings.durationMs,
    acquisitions: sum(outcome.counts),
    allAcquisitions: outcome.all,
    latencyMs: percentiles(Float64Array.from(outcome.samples)),
    perClient: { min: Math.min(...outcome.counts), max: Math.max(...outcome.counts) },
    cpuMicros: cpuSince(cpu),
  };
  if (settings.workload !== 'RW') return result;
  const reads = sum(outcome.counts.filter((_, i) => clients[i]?.mode === 'read'));
  return { ...result, reads, writes: result.acquisitions - reads };
}

async function cycle(session: LockSession, plan: ClientPlan): Promise<void> {
  const release = await session.acquire(plan.name, plan.mode);
  await release();
}

/** Every client cycles until `windowMs` has passed; grants after the window are counted apart. */
async function loop(
  sessions: readonly LockSession[],
  clients: readonly ClientPlan[],
  windowMs: number,
): Promise<{ counts: number[]; all: number; samples: number[] }> {
  const counts = clients.map(() => 0);
  const samples: number[] = [];
  let all = 0;
  const start = performance.now();
  const end = start + windowMs;
  await Promise.all(
    clients.map(async (plan, i) => {
      const session = sessions[i];
      if (!session) return;
      while (performance.now() < end) {
        const begun = performance.now();
        const release = await session.acquire(plan.name, plan.mode);
        const held = performance.now();
        all += 1;
        await release();
        if (held > end) break;
        counts[i] = (counts[i] ?? 0) + 1;
        if (plan.sample === 'wait') samples.push(held - begun);
        else if (plan.sample === 'cycle') samples.push(performance.now() - begun);
      }
    }),
  );
  return { counts, all, samples };
}

/** p50 and p99 by nearest rank, in ms with 3 decimals. */
export function percentiles(samples: Float64Array): { p50: number; p99: number } {
  const sorted = Float64Array.from(samples).sort();
  const at = (p: number): number => {
    if (sorted.length === 0) return 0;
    const value = sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
    return Math.round(value * 1000) / 1000;
  };
  return { p50: at(50), p99: at(99) };
}

function cpuSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
