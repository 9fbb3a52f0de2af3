/*
 * The ElectionService's handlers: Campaign (a lock stream on the Campaign wire), the Observe
 * stream, and the unary Leader, Proclaim and Resign, each admitting its caller through the gate.
 */
import type { ServerWritableStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  ElectionServiceServer,
  ElectionTerm,
  ObserveRequest,
  ObserveResponse,
} from '../../gen/lockstream/v1/election.js';
import { writeDrained } from '../../common/abort.js';
import { observeElection, type ElectionEvent, type LockEngine, type TermRecord } from '../engine/index.js';
import type { CoordinationStore } from '../stores/store.js';
import { LockError } from '../lock-error.js';
import { validateValue } from './acquire-request.js';
import { CAMPAIGN_WIRE } from './campaign-wire.js';
import { lockStreamHandler } from './lock-stream.js';
import { serverStream, unary } from './unary-handlers.js';
import type { LockStreamOptions } from './wire.js';

type ObserveCall = ServerWritableStream<ObserveRequest, ObserveResponse>;

/** The ElectionService: Campaign is a lock stream; the others read and write the election's history. */
export function createElectionHandlers(
  streamOptions: LockStreamOptions,
  { engine, store, logger }: { engine: LockEngine; store: CoordinationStore; logger: Logger },
): ElectionServiceServer {
  const { gate, shutdown } = streamOptions;
  return {
    campaign: lockStreamHandler(CAMPAIGN_WIRE, streamOptions),
    leader: unary(logger, gate, async ({ name }, caller) => {
      caller.checkSee(name);
      const leader = await engine.elections.leader(name);
      if (!leader) throw new LockError('NOT_FOUND', `election "${name}": nobody leads`);
      return { leader: toWireTerm(leader, leader.proclaimed ?? leader.value) };
    }),
    proclaim: unary(logger, gate, async ({ name, term, value }, caller) => {
      caller.checkAcquire(name, 'candidate');
      validateValue('value', value);
      await engine.elections.proclaim(name, term, value);
      return {};
    }),
    resign: unary(logger, gate, async ({ name, term }, caller) => {
      caller.checkAcquire(name, 'candidate');
      await engine.resign(name, term);
      logger.info({ election: name, term, caller: caller.name }, 'resignation asked');
      return {};
    }),
    observe: serverStream(logger, shutdown, async (call: ObserveCall, signal) => {
      const { name, fromTerm } = call.request;
      gate.admit(call).checkSee(name);
      await observeElection({
        history: engine.elections,
        store,
        name,
        lockPath: engine.lockPath(name),
        fromTerm,
        signal,
        tell: (event) => writeDrained(call, toWireEvent(event), signal),
      });
    }),
  };
}

function toWireTerm(record: TermRecord, value: Uint8Array): ElectionTerm {
  return {
    term: record.term,
    value: Buffer.from(value.buffer, value.byteOffset, value.byteLength),
    owner: record.owner,
    electedAt: new Date(record.electedAt),
  };
}

function toWireEvent(event: ElectionEvent): ObserveResponse {
  switch (event.kind) {
    case 'term':
      return { kind: { $case: 'term', value: toWireTerm(event.record, event.value) } };
    case 'proclaimed': {
      const { value } = event;
      return {
        kind: {
          $case: 'proclaimed',
          value: { term: event.term, value: Buffer.from(value.buffer, value.byteOffset, value.byteLength) },
        },
      };
    }
    case 'vacant':
      return { kind: { $case: 'vacant', value: { afterTerm: event.afterTerm } } };
    case 'history-gone':
      return { kind: { $case: 'historyGone', value: { firstTerm: event.firstTerm } } };
    case 'skipped':
      return { kind: { $case: 'skipped', value: { firstTerm: event.firstTerm } } };
  }
}
