/*
 * How an instance that took a store session over (see SessionTakeover) finds the lockstream
 * sessions in it: every node of a resumable session carries a RequestTag, so the nodes alone
 * say which session each request belongs to and what it asked for.
 */
import crypto from 'node:crypto';
import { baseName, parentPath, type OwnedNode } from '../stores/store.js';
import type { AcquireRequest, LockTarget, RequestTag } from './lock-request.js';
import { decodeLockName } from './lock-nodes.js';
import { parseNodeName } from './lock-nodes.js';
import { parseNodeRecord, publishedValue, type NodeRecord } from './lock-nodes.js';
import type { SessionKind } from './lock-session.js';

/** A resume token's key: what nodes and the registry keep instead of the token itself. */
export function resumeKey(token: string): string {
  return sha256(token).slice(0, 24);
}

/**
 * SHA-256 as base64url: the one-shot `crypto.hash` (Node 20.12 and later; a third of a Hash
 * object's cost, one per session opened), else a Hash object.
 */
const sha256: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'base64url')
    : (text) => crypto.createHash('sha256').update(text).digest('base64url');

/** A lockstream session as its nodes describe it. */
export interface FoundSession {
  readonly key: string;
  readonly kind: SessionKind;
  readonly graceMs: number;
  readonly callerName: string | undefined;
  readonly requests: FoundRequest[];
}

export interface FoundRequest {
  readonly id: number;
  readonly request: AcquireRequest;
  /** Its nodes, in the request's order (a multi-lock's in its locks' order). */
  readonly nodes: OwnedNode[];
}

/**
 * The sessions the lock nodes among `nodes` belong to, and the lock nodes of no resumable
 * session (their requests' streams ended with the instance that made them). Nodes that are
 * not lock nodes under `locksPath` are in neither.
 */
export function sessionsOfNodes(
  nodes: readonly OwnedNode[],
  locksPath: string,
): { sessions: FoundSession[]; untagged: OwnedNode[] } {
  const sessions = new Map<string, { session: FoundSession; parts: Map<number, TaggedNode[]> }>();
  const untagged: OwnedNode[] = [];
  for (const node of nodes) {
    const lockDir = parentPath(node.path);
    if (parentPath(lockDir) !== locksPath || !parseNodeName(baseName(node.path))) continue;
    const record = parseNodeRecord(node.data);
    const tag = validTag(record.session);
    if (!tag) {
      untagged.push(node);
      continue;
    }
    let entry = sessions.get(tag.key);
    if (!entry) {
      entry = {
        session: { key: tag.key, kind: tag.kind, graceMs: tag.grace, callerName: tag.caller, requests: [] },
        parts: new Map(),
      };
      sessions.set(tag.key, entry);
    }
    const parts = entry.parts.get(tag.id) ?? [];
    parts.push({ node, record, tag, name: decodeLockName(baseName(lockDir)) });
    entry.parts.set(tag.id, parts);
  }
  return {
    sessions: [...sessions.values()].map(({ session, parts }) => {
      for (const [id, tagged] of parts) session.requests.push(requestOf(id, tagged));
      return session;
    }),
    untagged,
  };
}

interface TaggedNode {
  readonly node: OwnedNode;
  readonly record: NodeRecord;
  readonly tag: RequestTag;
  /** The lock's name, from its queue's path. */
  readonly name: string;
}

/** The request that made `tagged` (one node, or a multi-lock's several). */
function requestOf(id: number, tagged: TaggedNode[]): FoundRequest {
  tagged.sort((a, b) => (a.tag.part ?? 0) - (b.tag.part ?? 0));
  const first = tagged[0]!;
  const { record, tag } = first;
  const targets = tagged.map(({ node, name }): LockTarget => {
    const parsed = parseNodeName(baseName(node.path))!;
    return parsed.mode === 'semaphore'
      ? { name, mode: parsed.mode, limit: parsed.limit, weight: parsed.weight }
      : { name, mode: parsed.mode };
  });
  const value = publishedValue(record);
  const common = {
    owner: record.owner,
    peer: record.peer,
    ...(value.byteLength > 0 ? { value } : {}),
    ...(tag.until === undefined ? {} : { waitTimeoutMs: waitLeftMs(tag.until, tag.wait) }),
  };
  const request: AcquireRequest =
    tag.set !== undefined && targets.length > 1
      ? { ...common, name: tag.set, mode: targets[0]!.mode, locks: targets }
      : { ...common, ...targets[0]! };
  return { id, request, nodes: tagged.map(({ node }) => node) };
}

/**
 * What is left of a wait another instance began, which ends at `until` by that instance's wall
 * clock. Only the wall clock can say (no monotonic clock is shared), so a clock here that is
 * ahead of that instance's by s (or stepped forward) ends the wait s early, at once if s is
 * more than what was left; one behind (or stepped back) cannot make it last longer than its
 * whole wait timeout from now (`wait`, in tags lockstream writes since it has been recorded).
 */
export function waitLeftMs(until: number, wait: unknown): number {
  const left = Math.max(1, until - Date.now());
  return typeof wait === 'number' && wait > 0 ? Math.min(left, wait) : left;
}

/** A node's tag if it reads as one lockstream wrote (anything else is no resumable session's). */
function validTag(tag: unknown): RequestTag | undefined {
  if (typeof tag !== 'object' || tag === null) return undefined;
  const { key, id, kind, grace } = tag as Partial<RequestTag>;
  if (typeof key !== 'string' || key === '') return undefined;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) return undefined;
  if (kind !== 'acquire' && kind !== 'session' && kind !== 'campaign') return undefined;
  if (typeof grace !== 'number' || !(grace > 0)) return undefined;
  return tag as RequestTag;
}
