import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { lazyChild } from '../../src/common/lazy-logger.js';

function capture(level: string): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

describe('lazyChild', () => {
  it('makes no child for calls below the level, and logs nothing', () => {
    const { logger, lines } = capture('info');
    const child = vi.spyOn(logger, 'child');
    const lazy = lazyChild(logger, { callId: 1 }).child({ lock: 'a' });
    lazy.debug({ token: '7' }, 'granted');
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it('logs with every binding, its own and its parents', () => {
    const { logger, lines } = capture('debug');
    const lazy = lazyChild(logger, { callId: 1 }).child({ lock: 'a' });
    lazy.debug({ token: '7' }, 'granted');
    lazy.warn('careful');
    expect(lines).toMatchObject([
      { callId: 1, lock: 'a', token: '7', msg: 'granted', level: 20 },
      { callId: 1, lock: 'a', msg: 'careful', level: 40 },
    ]);
  });

  it('asks a bindings source for its bindings only when a line is logged at an enabled level', () => {
    const { logger, lines } = capture('info');
    let lock = 'none yet';
    const source = { logBindings: vi.fn(() => ({ callId: 2, lock })) };
    const lazy = lazyChild(logger, source);
    lazy.debug('granted');
    expect(source.logBindings).not.toHaveBeenCalled();
    lock = 'b';
    lazy.info('revocation requested');
    lazy.warn('careful');
    expect(source.logBindings).toHaveBeenCalledTimes(1);
    expect(lines).toMatchObject([
      { callId: 2, lock: 'b', msg: 'revocation requested', level: 30 },
      { callId: 2, lock: 'b', msg: 'careful', level: 40 },
    ]);
  });
});
