/*
 * An election's history (ElectionHistory): one persistent record per term, written while its
 * leader's node exists and before its leader is told it leads; the current leader read from it,
 * its value proclaimed into it, and the oldest terms pruned.
 */
import type { Logger } from 'pino';
import { LockError } from '../lock-error.js';
import { joinPath, type CoordinationStore, type RecordTransactions } from '../stores/store.js';
import { encodeLockName } from './lock-nodes.js';
import { parseNodeRecord } from './lock-nodes.js';

/** How many terms an election's history keeps (the newest). */
export const HISTORY_TERMS = 100;

/** Tries of a proclamation whose compare-and-set met another writer. */
const PROCLAIM_TRIES = 16;

/** One term as recorded: who was elected, with what value, and the latest value it proclaimed. */
export interface TermRecord {
  readonly term: bigint;
  /** The value the leader campaigned with. */
  readonly value: Uint8Array;
  /** The latest value it proclaimed, if it did. */
  readonly proclaimed: Uint8Array | undefined;
  /** How many times it proclaimed (the record's data version). */
  readonly proclamations: number;
  readonly owner: string;
  /** When the term was recorded (epoch ms, the recording instance's clock). */
  readonly electedAt: number;
  /** The leader's node: the term lasts while it exists. */
  readonly node: string;
}

/** A term record as stored (JSON). */
interface StoredTerm {
  node: string;
  owner?: string;
  /** base64; absent when empty. */
  value?: string;
  proclaimed?: string;
  at: string;
  instance?: string;
}

/** The history's view of an election: its terms, oldest first, and the last one pruned. */
export interface HistoryListing {
  /** Recorded terms, increasing. */
  readonly terms: readonly bigint[];
  /** Every term up to this one is gone from the history (0n: none was pruned). */
  readonly prunedThrough: bigint;
}

/** A term's record name: its term in 20 digits, so that names sort as terms do. */
function termName(term: bigint): string {
  return term.toString().padStart(20, '0');
}

function termOf(name: string): bigint | undefined {
  return /^\d{20}$/.test(name) ? BigInt(name) : undefined;
}

const encoder = new TextEncoder();
const EMPTY = new Uint8Array();

function encode(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

function fromBase64(text: string | undefined): Uint8Array {
  return text === undefined ? EMPTY : new Uint8Array(Buffer.from(text, 'base64'));
}

function toBase64(value: Uint8Array | undefined): string | undefined {
  return value === undefined || value.byteLength === 0 ? undefined : Buffer.from(value).toString('base64');
}

/** The current term is not `term`: it is over, another election's, or was never granted. */
export function notLeader(name: string, term: bigint): LockError {
  return new LockError(
    'NOT_HELD',
    `term ${term} is not the current leader's in election "${name}": it ended, or was never granted there`,
  );
}

/**
 * The histories of every election, in the store under `<root>/elections/<name>`: `terms/<term>`
 * per recorded term and `pruned`, the last term dropped from it. A term is recorded in one step
 * with a check that its leader's node exists (RecordTransactions), so records are written in the
 * order the terms began (a term begins only once the node before it is gone) and a deposed
 * leader's late write fails; its leader is told it leads only once it is recorded.
 */
export class ElectionHistory {
  readonly #store: CoordinationStore;
  readonly #records: RecordTransactions | undefined;
  readonly #root: string;
  readonly #instanceId: string;
  readonly #logger: Logger;

  constructor(options: {
    readonly store: CoordinationStore;
    readonly records: RecordTransactions | undefined;
    readonly rootPath: string;
    readonly instanceId: string;
    readonly logger: Logger;
  }) {
    this.#store = options.store;
    this.#records = options.records;
    this.#root = joinPath(options.rootPath, 'elections');
    this.#instanceId = options.instanceId;
    this.#logger = options.logger;
  }

  /** The store directory of an election's term records. */
  termsDir(name: string): string {
    return joinPath(joinPath(this.#root, encodeLockName(name)), 'terms');
  }

  /** The store path of one term's record. */
  termPath(name: string, term: bigint): string {
    return joinPath(this.termsDir(name), termName(term));
  }

  #prunedPath(name: string): string {
    return joinPath(joinPath(this.#root, encodeLockName(name)), 'pruned');
  }

  /** The store's transactions, or UNSUPPORTED where it has none. */
  get #transactions(): RecordTransactions {
    if (this.#records?.transactions) return this.#records;
    throw new LockError(
      'UNSUPPORTED',
      "elections need a back end that writes several nodes in one step: the embedded store, or ZooKeeper through lockstream's own client (--zookeeper-client protocol, the default)",
    );
  }

  /** Fails with UNSUPPORTED where this store cannot keep a history. */
  checkSupported(): void {
    void this.#transactions;
  }

  /**
   * Records `term`, led by the request whose node is `node`: 'recorded' now, 'recorded-before'
   * (a grant told again, or adopted by another instance), or 'gone' when the node no longer
   * exists (the term never began for anyone).
   */
  async begin(
    name: string,
    term: bigint,
    node: string,
    candidate: { readonly value?: Uint8Array | undefined; readonly owner?: string | undefined },
  ): Promise<'recorded' | 'recorded-before' | 'gone'> {
    const records = this.#transactions;
    const dir = this.termsDir(name);
    await records.makeDirs(dir);
    const value = toBase64(candidate.value);
    const stored: StoredTerm = {
      node,
      at: new Date().toISOString(),
      instance: this.#instanceId,
      ...(candidate.owner ? { owner: candidate.owner } : {}),
      ...(value === undefined ? {} : { value }),
    };
    const outcome = await records.transact([
      { op: 'check', path: node },
      { op: 'create', path: joinPath(dir, termName(term)), data: encode(stored) },
    ]);
    if (outcome.kind === 'done') {
      this.#prune(name).catch((error: unknown) =>
        this.#logger.warn({ election: name, err: error }, 'pruning the election history failed'),
      );
      return 'recorded';
    }
    if (outcome.index === 0) return 'gone';
    if (outcome.reason === 'exists') return 'recorded-before';
    throw new LockError(
      'UNAVAILABLE',
      `election "${name}": term ${term} could not be recorded (${outcome.reason})`,
    );
  }

  /** The recorded terms of an election, oldest first, and how far it was pruned. */
  async list(name: string): Promise<HistoryListing> {
    this.checkSupported();
    const [children, pruned] = await Promise.all([
      this.#store.children(this.termsDir(name)),
      this.#store.nodeData(this.#prunedPath(name)),
    ]);
    const terms = children.flatMap((child) => {
      const term = termOf(child);
      return term === undefined ? [] : [term];
    });
    terms.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const through = pruned ? parseNodeRecord(pruned.data) : {};
    const prunedThrough =
      typeof (through as { through?: unknown }).through === 'string'
        ? BigInt((through as { through: string }).through)
        : 0n;
    return { terms, prunedThrough };
  }

  /**
   * A term's record, with its data version and its fields as stored; undefined when it is not
   * (or no longer) recorded.
   */
  async read(
    name: string,
    term: bigint,
  ): Promise<{ record: TermRecord; version: number; stored: StoredTerm } | undefined> {
    const read = await this.#store.nodeData(this.termPath(name, term));
    if (!read) return undefined;
    const stored = parseNodeRecord(read.data) as Partial<StoredTerm>;
    if (typeof stored.node !== 'string') return undefined;
    return {
      version: read.version,
      stored: stored as StoredTerm,
      record: {
        term,
        node: stored.node,
        value: fromBase64(stored.value),
        proclaimed:
          stored.proclaimed === undefined && read.version === 0 ? undefined : fromBase64(stored.proclaimed),
        proclamations: read.version,
        owner: stored.owner ?? '',
        electedAt: Date.parse(stored.at ?? '') || 0,
      },
    };
  }

  /** Whether a term's leader still leads: its node exists. */
  async leads(record: TermRecord): Promise<boolean> {
    return (await this.#store.nodeData(record.node)) !== null;
  }

  /** The current leader's term record; undefined when nobody leads. */
  async leader(name: string): Promise<TermRecord | undefined> {
    const { terms } = await this.list(name);
    const last = terms.at(-1);
    if (last === undefined) return undefined;
    const read = await this.read(name, last);
    return read && (await this.leads(read.record)) ? read.record : undefined;
  }

  /**
   * Proclaims `value` for the leader of `term`: into its term record (observers read it there)
   * and its node (DescribeLock shows it), both in one step with the node still there. NOT_HELD
   * (see notLeader) when `term` is not the current leader's.
   */
  async proclaim(name: string, term: bigint, value: Uint8Array): Promise<void> {
    const records = this.#transactions;
    const path = this.termPath(name, term);
    for (let attempt = 1; attempt <= PROCLAIM_TRIES; attempt += 1) {
      const read = await this.read(name, term);
      if (!read) throw notLeader(name, term);
      const node = await this.#store.nodeData(read.record.node);
      if (!node) throw notLeader(name, term);
      const { stored } = read;
      const nodeRecord = parseNodeRecord(node.data);
      const encoded = toBase64(value);
      const outcome = await records.transact([
        {
          op: 'set',
          path: read.record.node,
          version: node.version,
          data: encode({ ...nodeRecord, value: encoded }),
        },
        { op: 'set', path, version: read.version, data: encode({ ...stored, proclaimed: encoded ?? '' }) },
      ]);
      if (outcome.kind === 'done') return;
      if (outcome.reason === 'missing') throw notLeader(name, term);
      // 'conflict': another writer (a proclamation, the holder's value, a revocation) came first.
    }
    throw new LockError('UNAVAILABLE', `election "${name}": the proclamation kept meeting other writes`);
  }

  /** Drops the oldest terms beyond HISTORY_TERMS, noting the last one dropped. */
  async #prune(name: string): Promise<void> {
    const { terms, prunedThrough } = await this.list(name);
    const excess = terms.length - HISTORY_TERMS;
    if (excess <= 0) return;
    const dropped = terms.slice(0, excess);
    const through = dropped.at(-1)!;
    if (through <= prunedThrough) return;
    const marker = this.#prunedPath(name);
    // The marker exists once something was pruned (it is written with the first pruning).
    const outcome = await this.#transactions.transact([
      prunedThrough > 0n
        ? { op: 'set', path: marker, data: encode({ through: through.toString() }) }
        : { op: 'create', path: marker, data: encode({ through: through.toString() }) },
      ...dropped.map((term) => ({
        op: 'delete' as const,
        path: this.termPath(name, term),
      })),
    ]);
    // Another instance pruned meanwhile: its step stands, and the next term prunes again.
    if (outcome.kind === 'failed') return;
  }
}
