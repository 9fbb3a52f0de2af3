/*
 * Asking a running server's HTTP probes (/livez, /readyz), once or over and over while
 * something happens to it.
 */
import { nextReceipt } from './lock-caller.js';
import type { ServerProcess } from './server-process.js';

export interface ProbeAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  /** Its place in the arrival order of lock-caller.ts's streams: comparable with their receipts. */
  readonly receipt: number;
}

/** The HTTP port a server started with --http-port printed. */
export async function httpPortOf(server: ServerProcess): Promise<number> {
  const line = await server.logged((l) => typeof l['httpPort'] === 'number');
  return line['httpPort'] as number;
}

/** One GET of `path` on the server's HTTP port. Rejects when nothing answers (the port is closed). */
export async function probe(
  port: number,
  path: '/livez' | '/readyz',
  init?: RequestInit,
): Promise<ProbeAnswer> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, init);
  const body = (await response.json()) as Record<string, unknown>;
  return { status: response.status, body, receipt: nextReceipt() };
}

/**
 * Asks `path` back to back until `stop` aborts or the port stops answering, telling `heard` of
 * each answer as it comes; resolves with every answer, in order.
 */
export async function probeUntil(
  port: number,
  path: '/livez' | '/readyz',
  stop: AbortSignal,
  heard: (answer: ProbeAnswer) => void = () => {},
): Promise<ProbeAnswer[]> {
  const answers: ProbeAnswer[] = [];
  while (!stop.aborted) {
    let answer: ProbeAnswer;
    try {
      answer = await probe(port, path);
    } catch {
      break;
    }
    answers.push(answer);
    heard(answer);
  }
  return answers;
}
