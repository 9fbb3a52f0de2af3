/**
 * Part 2 of `npm run bench:zk-sessions`: a ZooKeeper session moved from a process that was
 * killed or paused to another, against ZooKeeper expiring it; and what the paused one does
 * when it is continued.
 */
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { EventType } from '../../src/server/stores/zookeeper/protocol/records.js';
import { errorName, ZooKeeperError } from '../../src/server/stores/zookeeper/protocol/zookeeper-error.js';
import { sendFourLetterWord } from '../../test/setup/zookeeper-process.js';
import type { LineProcess } from '../processes.js';
import { SESSION_TIMEOUT_MS, sleep, startWorker, uniqueRoot } from './worker-process.js';

/** Where the holder and the taker connect: one server, or two members of an ensemble. */
export interface TakeoverCluster {
  readonly label: string;
  readonly holderConnect: string;
  readonly takerConnect: string;
  /** Every member's client port, to count a session's connections (`cons`). */
  readonly clientPorts: readonly number[];
}

export interface TakeoverResult {
  readonly cluster: string;
  readonly signal: 'SIGKILL' | 'SIGSTOP';
  readonly held: number;
  /** From the signal to the session re-established by the taker with the holder's id and password. */
  readonly attachedMs: number;
  /** From the signal to the taker's `multi` applied: check + setData of the ownership record, setData of a node. */
  readonly wroteMs: number;
  /** The session's connections across the members once it moved (`cons`): the holder's was closed if 1. */
  readonly connectionsAfterMove: number;
  readonly continued?: ContinuedHolder;
}

/** What a paused holder does once continued after its session moved. */
export interface ContinuedHolder {
  /** The first thing its connection reports ('none' within the window). */
  readonly firstEvent: string;
  /** In the window after SIGCONT: what each side's connection went through. */
  readonly afterContinue: Contest;
  /** The holder's write fenced on the ownership record (a multi with a check), then its bare setData. */
  readonly fencedWrite: string;
  readonly bareWrite: string;
  /** The taker's own setData after the holder's writes. */
  readonly takerWrite: string;
  /** From those writes to the end of a window after them. */
  readonly afterWrites: Contest;
  /** After the holder's close() (closeSession, as closing a given-up link does). */
  readonly afterHolderClose?: { readonly taker: 'expired' | 'kept'; readonly nodesLeft: number };
}

/**
 * One phase after the holder is continued: times the holder re-attached the session (taking it
 * back), the taker lost it and re-attached it; the session's connections at the phase's end.
 */
export interface Contest {
  readonly holderAttaches: number;
  readonly takerDisconnects: number;
  readonly takerAttaches: number;
  readonly connectionsAtEnd: number;
}

interface HolderOpened {
  readonly sessionId: string;
  readonly password: string;
  readonly first: string;
  readonly last: string;
  readonly ownerPath: string;
  readonly ownerVersion: number;
}

/** How long the two owners of a session are watched after the holder is continued. */
export const CONTEST_WINDOW_MS = 2_000;
const CONNECTION_EVENTS = ['connected', 'disconnected', 'expired'];

function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

async function outcome(attempt: () => Promise<unknown>): Promise<string> {
  try {
    await attempt();
    return 'ok';
  } catch (error) {
    return error instanceof ZooKeeperError ? errorName(error.code) : String(error);
  }
}

async function sessionConnections(cluster: TakeoverCluster, sessionId: string): Promise<number> {
  const outputs = await Promise.all(
    cluster.clientPorts.map((port) => sendFourLetterWord(port, 'cons', 5_000)),
  );
  return outputs
    .join('\n')
    .split('\n')
    .filter((line) => line.includes(`sid=0x${sessionId},`)).length;
}

/**
 * A holder process opens a session with `held` nodes and an ownership record; it gets `signal`;
 * this process attaches to the session and writes through it. A paused holder is then
 * continued and watched; with `closeFromHolder` it finally closes the session it lost.
 */
export async function takeover(
  cluster: TakeoverCluster,
  held: number,
  signal: 'SIGKILL' | 'SIGSTOP',
  closeFromHolder: boolean,
): Promise<TakeoverResult> {
  const root = uniqueRoot(`takeover-${held}`);
  const holderEvents: string[] = [];
  const holder = startWorker(cluster.holderConnect, 'holder', root, held, (m) => {
    if (CONNECTION_EVENTS.includes(String(m['event']))) holderEvents.push(String(m['event']));
  });
  let taker: ZooKeeperConnection | undefined;
  try {
    const opened = (await holder.next('opened')) as unknown as HolderOpened;
    process.kill(holder.pid, signal);
    const signalledAt = performance.now();
    taker = await ZooKeeperConnection.connect({
      servers: cluster.takerConnect.split(','),
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      session: { id: BigInt(`0x${opened.sessionId}`), password: Buffer.from(opened.password, 'hex') },
    });
    const attachedMs = performance.now() - signalledAt;
    const version = opened.ownerVersion;
    await taker.multi([
      { op: 'check', path: opened.ownerPath, version },
      { op: 'setData', path: opened.ownerPath, data: Buffer.from('B'), version },
      { op: 'setData', path: opened.last, data: Buffer.from('B'), version: -1 },
    ]);
    const wroteMs = performance.now() - signalledAt;
    const children = await taker.getChildren(`${root}/locks`);
    const first = await taker.exists(opened.first);
    if (children.length !== held || first?.ephemeralOwner !== taker.sessionId) {
      throw new Error(
        `after the takeover of ${held} nodes: ${children.length} left, the first owned by ${first?.ephemeralOwner}`,
      );
    }
    const result: TakeoverResult = {
      cluster: cluster.label,
      signal,
      held,
      attachedMs,
      wroteMs,
      connectionsAfterMove: await sessionConnections(cluster, opened.sessionId),
    };
    if (signal === 'SIGKILL') return result;
    const continued = await continueHolder(
      cluster,
      holder,
      holderEvents,
      taker,
      opened,
      root,
      closeFromHolder,
    );
    return { ...result, continued };
  } finally {
    // A stopped process acts on no signal but SIGKILL until it is continued.
    if (signal === 'SIGSTOP') signalIfAlive(holder.pid, 'SIGCONT');
    await holder.kill();
    await taker?.close();
  }
}

async function continueHolder(
  cluster: TakeoverCluster,
  holder: LineProcess,
  holderEvents: string[],
  taker: ZooKeeperConnection,
  opened: HolderOpened,
  root: string,
  closeFromHolder: boolean,
): Promise<ContinuedHolder> {
  const taken = { disconnects: 0, attaches: 0 };
  taker.on('disconnected', () => (taken.disconnects += 1));
  taker.on('connected', () => (taken.attaches += 1));
  const attaches = (): number => holderEvents.filter((event) => event === 'connected').length;
  let mark = { holder: attaches(), ...taken };
  /** What happened since the last mark; sets a new one. */
  const phase = async (): Promise<Contest> => {
    const connectionsAtEnd = await sessionConnections(cluster, opened.sessionId);
    const contest = {
      holderAttaches: attaches() - mark.holder,
      takerDisconnects: taken.disconnects - mark.disconnects,
      takerAttaches: taken.attaches - mark.attaches,
      connectionsAtEnd,
    };
    mark = { holder: attaches(), ...taken };
    return contest;
  };
  process.kill(holder.pid, 'SIGCONT');
  // Fixed windows in which to count how often the two take the session from each other.
  await sleep(CONTEST_WINDOW_MS);
  const afterContinue = await phase();
  const firstEvent = holderEvents[0] ?? 'none';
  holder.send('act');
  const acted = await holder.next('acted');
  const takerWrite = await outcome(() => taker.setData(opened.last, Buffer.from('B again')));
  await sleep(CONTEST_WINDOW_MS);
  const continued: ContinuedHolder = {
    firstEvent,
    afterContinue,
    fencedWrite: String(acted['fenced']),
    bareWrite: String(acted['unfenced']),
    takerWrite,
    afterWrites: await phase(),
  };
  if (!closeFromHolder) return continued;
  const expired = new Promise<'expired'>((resolve) => taker.once('expired', () => resolve('expired')));
  holder.send('close');
  await holder.next('closed');
  const takerAfter = await Promise.race([expired, sleep(SESSION_TIMEOUT_MS).then(() => 'kept' as const)]);
  const observer = await ZooKeeperConnection.connect({
    servers: cluster.takerConnect.split(','),
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
  });
  try {
    const nodesLeft = (await observer.getChildren(`${root}/locks`)).length;
    return { ...continued, afterHolderClose: { taker: takerAfter, nodesLeft } };
  } finally {
    await observer.close();
  }
}

/** From SIGKILL of a process holding `held` nodes to ZooKeeper deleting them (its session expired). */
export async function expiry(connect: string, held: number): Promise<number> {
  const holder = startWorker(connect, 'holder', uniqueRoot(`expiry-${held}`), held);
  const observer = await ZooKeeperConnection.connect({
    servers: connect.split(','),
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
  });
  try {
    const opened = (await holder.next('opened')) as unknown as HolderOpened;
    let deletedAt!: (at: number) => void;
    const deleted = new Promise<number>((resolve) => (deletedAt = resolve));
    const watched = await observer.exists(opened.last, (event) => {
      if (event.type === EventType.nodeDeleted) deletedAt(performance.now());
    });
    if (watched === null) throw new Error(`expiry: the holder's node ${opened.last} is missing`);
    process.kill(holder.pid, 'SIGKILL');
    const killedAt = performance.now();
    return (await deleted) - killedAt;
  } finally {
    await holder.kill();
    await observer.close();
  }
}
