/*
 * Taking store sessions over from other instances (see SessionTakeover), and leaving one for
 * them: StoreTakeovers adopts the lockstream sessions found in a taken session's nodes (see
 * sessionsOfNodes), keeps its requests without a grace until their clients must have noticed,
 * and releases the session once nothing in it is left.
 */
import type { Logger } from 'pino';
import { isLockError, LockError } from '../lock-error.js';
import type { OwnedNode, SessionTakeover, StoreBackend } from '../stores/store.js';
import type { LockEngine } from './lock-engine.js';
import { parseNodeRecord } from './lock-nodes.js';
import type { LockSession, SessionEvents, SessionKind } from './lock-session.js';
import type { RequestAccounting } from './request-news.js';
import { sessionsOfNodes } from './request-nodes.js';
import { checkedClaim } from './resume-token.js';

/** Where the engine's store session can move (see LockSessionsOptions.takeover). */
export interface TakeoverOptions {
  readonly sessions: SessionTakeover;
  readonly engineFor: (store: StoreBackend) => LockEngine;
  /** Counts the requests of sessions taken over (their streams are not attached yet). */
  readonly accounting: RequestAccounting;
}

/** The sessions that run on one engine (this server's own store session, or one taken over). */
export interface EngineSessions {
  readonly engine: LockEngine;
  readonly sessions: Set<LockSession>;
  /** The taken-over store session's own store, closed once its last session has ended. */
  readonly taken?: StoreBackend;
  /** The name it was published under (its key in #taken). */
  readonly name?: string;
  /**
   * Set while requests found in the taken session without a grace are kept (see
   * #keepUnresumable): the store session stays open until they are released.
   */
  keeping?: NodeJS.Timeout | undefined;
}

/** What StoreTakeovers asks of the LockSessions it serves. */
export interface TakeoverHost {
  /** A lockstream session on `group`, registered to be resumed by its key. */
  newSession(
    group: EngineSessions,
    options: {
      kind: SessionKind;
      graceMs: number;
      callerName: string | undefined;
      accounting: RequestAccounting;
      logger: Logger;
      resumeToken: undefined;
      resumeKey: string;
    },
  ): LockSession;
  closed(): boolean;
  /** Stopping by handing every session over: nothing is released then. */
  handingOver(): boolean;
}

/**
 * The store sessions this server took over from other instances (see SessionTakeover), by the
 * name they were published under, with the lockstream sessions found in their nodes; each
 * released once none of them is left, or moved on when another instance takes it in turn.
 */
export class StoreTakeovers {
  readonly #options: TakeoverOptions;
  readonly #host: TakeoverHost;
  readonly #logger: Logger;
  readonly #events: SessionEvents | undefined;
  readonly #maxResumeGraceMs: number;
  /** Store sessions taken over (or being taken), by the name they were published under. */
  readonly #taken = new Map<string, Promise<EngineSessions | undefined>>();
  /** Those of #taken whose takeover is done, until they are released. */
  readonly #groups = new Set<EngineSessions>();

  constructor(
    options: TakeoverOptions,
    host: TakeoverHost,
    context: { logger: Logger; events: SessionEvents | undefined; maxResumeGraceMs: number },
  ) {
    this.#options = options;
    this.#host = host;
    this.#logger = context.logger;
    this.#events = context.events;
    this.#maxResumeGraceMs = context.maxResumeGraceMs;
  }

  /** Every store session taken over and not released. */
  get groups(): ReadonlySet<EngineSessions> {
    return this.#groups;
  }

  /**
   * Whether a resume of `token` (as `kind`, by `callerName`) may take the store session
   * published as `name` over: its proof checks out against that session's record, as the
   * session itself would check the token. A takeover under way or done is joined unchecked:
   * joining it changes nothing.
   */
  async mayTakeOver(
    name: string,
    token: string,
    kind: SessionKind,
    callerName: string | undefined,
  ): Promise<boolean> {
    const { sessions } = this.#options;
    if (name === '' || name === sessions.publishedAs || this.#host.closed()) return false;
    if (this.#taken.has(name)) return true;
    const checked = checkedClaim(token, kind, callerName);
    return checked !== undefined && (await sessions.vouched(name, checked.claim, checked.proof));
  }

  /**
   * Takes the store session published as `name` over, once (concurrent resumes share it). A
   * takeover that fails (another instance took the session first, or ZooKeeper is out of reach)
   * leaves the session alive where it is: UNAVAILABLE, to be resumed again, never NOT_FOUND.
   */
  async takeOver(name: string): Promise<void> {
    await this.#taking(name).catch((error: unknown) => {
      if (!(error instanceof LockError) || error.code === 'SHUTTING_DOWN') throw error;
      throw new LockError(
        'UNAVAILABLE',
        `could not take over the store session "${name}" of another lockstream instance (${error.message}); it may live on there or on an instance that took it over first: resume it again, on any instance`,
        { cause: error },
      );
    });
  }

  async #taking(name: string): Promise<void> {
    if (name === '' || name === this.#options.sessions.publishedAs || this.#host.closed()) return;
    let taking = this.#taken.get(name);
    if (!taking) {
      taking = this.#adopt(name);
      this.#taken.set(name, taking);
      // A name whose session was not there (or could not be taken) may be tried again later.
      void taking.then(
        (group) => {
          if (!group) this.#taken.delete(name);
        },
        () => this.#taken.delete(name),
      );
    }
    await taking;
  }

  async #adopt(name: string): Promise<EngineSessions | undefined> {
    const takeover = this.#options;
    const startedAt = performance.now();
    const taken = await takeover.sessions.takeOver(name).catch((error: unknown) => {
      // A token whose first part names no session (a made-up one) is one nobody has.
      if (isLockError(error, 'INVALID_ARGUMENT')) return undefined;
      throw error;
    });
    if (!taken) return undefined;
    const engine = takeover.engineFor(taken.store);
    const group: EngineSessions = { engine, sessions: new Set(), taken: taken.store, name };
    const { sessions, untagged } = sessionsOfNodes(taken.nodes, engine.locksPath);
    const keptMs = untagged.length > 0 ? keepUnresumableMs(untagged, taken.expiresAfterMs) : 0;
    if (untagged.length > 0) this.#keepUnresumable(group, untagged, keptMs);
    let requests = 0;
    for (const found of sessions) {
      const session = this.#host.newSession(group, {
        kind: found.kind,
        graceMs: Math.min(found.graceMs, this.#maxResumeGraceMs),
        callerName: found.callerName,
        accounting: takeover.accounting,
        logger: this.#logger.child({ takenFrom: name }),
        resumeToken: undefined,
        resumeKey: found.key,
      });
      for (const { id, request, nodes } of found.requests) session.adopt(id, request, nodes);
      requests += found.requests.length;
      this.#events?.('taken-over', found.kind);
      // Kept for its grace, as if its stream had just broken: its client resumes it, or it ends.
      session.detach();
    }
    this.#logger.info(
      {
        session: name,
        sessions: sessions.length,
        requests,
        unresumable: untagged.length,
        keptMs,
        tookMs: Math.round((performance.now() - startedAt) * 10) / 10,
      },
      'took over the store session of another lockstream instance',
    );
    taken.store.takeover?.onTakenOver((by) => this.#handOver(group, `taken over by ${by}`));
    this.#groups.add(group);
    this.releaseIfIdle(group);
    return group;
  }

  /**
   * Keeps the requests of a taken session that had no grace (nobody can resume them) for
   * `keepMs` after the takeover (see keepUnresumableMs), then releases them. Their streams need
   * not have ended: the instance the session was taken from may be paused (SIGSTOP, a long GC, a
   * stopped VM) rather than gone, their holders told nothing, and they stop holding only once
   * their clients must have noticed.
   */
  #keepUnresumable(group: EngineSessions, nodes: readonly { path: string }[], keepMs: number): void {
    const paths = nodes.map((node) => node.path);
    group.keeping = setTimeout(() => {
      void group.taken
        ?.delete(paths)
        .catch((error: unknown) => {
          this.#logger.warn(
            { err: error, session: group.name },
            'could not release the requests of unresumable streams',
          );
        })
        .finally(() => {
          group.keeping = undefined;
          if (!this.#host.handingOver() && !this.#host.closed()) this.releaseIfIdle(group);
        });
    }, keepMs);
  }

  /** Releases a taken-over store session once none of its sessions is left, nor a request it keeps. */
  releaseIfIdle(group: EngineSessions): void {
    if (group.sessions.size === 0 && group.keeping === undefined) this.#release(group);
  }

  /** A taken-over store session none of whose lockstream sessions is left: it ends, and its nodes with it. */
  #release(group: EngineSessions): void {
    this.#groups.delete(group);
    // Its entry in #taken is its own: a name is taken over again only once its entry is gone.
    if (group.name !== undefined) this.#taken.delete(group.name);
    void group.taken?.close();
  }

  /** The store session under `group` moved to another instance: so does every session on it. */
  #handOver(group: EngineSessions, why: string): void {
    this.#logger.warn({ sessions: group.sessions.size }, `store session ${why}: its sessions move with it`);
    // The requests kept go with the session: whoever took it keeps them in turn.
    clearTimeout(group.keeping);
    group.keeping = undefined;
    for (const session of [...group.sessions]) session.handOver();
    this.releaseIfIdle(group);
  }

  /**
   * Stops keeping `group`'s requests without a grace (the server stops); whether it kept some,
   * so that its store session is let go, never closed, and they go when ZooKeeper expires it.
   */
  stopKeeping(group: EngineSessions): boolean {
    const keeps = group.keeping !== undefined;
    clearTimeout(group.keeping);
    group.keeping = undefined;
    return keeps;
  }

  /**
   * At shutdown, once every session has ended: a store session that keeps requests without a
   * grace is let go, not closed, so they go when ZooKeeper expires it, no sooner than if this
   * instance had stayed.
   */
  async letGoKept(): Promise<void> {
    const kept = [...this.#groups].filter((group) => this.stopKeeping(group));
    await Promise.all(
      kept.map(async (group) => {
        this.#groups.delete(group);
        if (group.name !== undefined) this.#taken.delete(group.name);
        await group.taken?.takeover?.handOver();
      }),
    );
  }
}

/**
 * How long after a takeover the requests found without a grace are kept: until each one's
 * client must have noticed its instance silent, or, had it no heartbeats, as long as the back
 * end would have kept them had nobody taken the session (its timeout). Counted from the
 * takeover, which is no earlier than when their instance was last heard (a little longer than
 * needed, never shorter). A client with heartbeats takes a server silent for three intervals as
 * gone (see NodeRecord.heartbeat); a fourth is the margin for its timers and the last message's
 * way. Never longer than the back end's timeout: ZooKeeper would have freed them by then.
 */
export function keepUnresumableMs(nodes: readonly OwnedNode[], expiresAfterMs: number): number {
  let keepMs = 0;
  for (const node of nodes) {
    const heartbeat = parseNodeRecord(node.data).heartbeat;
    const noticedAfterMs =
      typeof heartbeat === 'number' && heartbeat > 0 ? HEARTBEATS_TO_NOTICE * heartbeat : expiresAfterMs;
    keepMs = Math.max(keepMs, Math.min(noticedAfterMs, expiresAfterMs));
  }
  return keepMs;
}

/** Three silent heartbeat intervals, and one more for margin (see keepUnresumableMs). */
const HEARTBEATS_TO_NOTICE = 4;
