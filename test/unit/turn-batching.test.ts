import { describe, expect, it } from 'vitest';
import type { WritableCall } from '../../src/server/transport/stream-writer.js';
import { batchedByTurn } from '../../src/server/transport/stream-writer.js';

/**
 * batchedByTurn without a socket. What it does to a real grpc-js call (one DATA frame per turn,
 * in order, backpressure kept) is in test/integration/turn-batching.test.ts.
 */
describe('batchedByTurn', () => {
  it('leaves a call of another shape as it is (the public path)', () => {
    const call: WritableCall<Buffer> = { write: () => true, once: () => undefined };
    expect(batchedByTurn(call)).toBe(call);
  });
});
