/*
 * Child loggers that cost nothing until they log: the pino child is made, and its bindings asked
 * for, only when a line is logged at an enabled level.
 */
import type { Bindings, Logger } from 'pino';

const noop = (): void => {};

/** What a lazy logger's bindings come from, asked once a line is logged at an enabled level. */
export interface BindingsSource {
  logBindings(): Bindings;
}

/** What a lazy child is: its parent, its bindings (or where they come from), and the real child once one was needed. */
interface LazyChild {
  readonly parent: Logger;
  readonly bindings: Bindings | BindingsSource;
  child: Logger | undefined;
}

function bindingsOf(lazy: LazyChild): Bindings {
  const { bindings } = lazy;
  return typeof bindings['logBindings'] === 'function'
    ? (bindings as BindingsSource).logBindings()
    : bindings;
}

function real(lazy: LazyChild): Logger {
  return (lazy.child ??= lazy.parent.child(bindingsOf(lazy)));
}

/**
 * One handler for every lazy child (a handler with closures per child cost more than the
 * child's own state, for every stream).
 */
const handler: ProxyHandler<LazyChild> = {
  get(lazy, property) {
    const { parent } = lazy;
    if (typeof property === 'string') {
      if (property in parent.levels.values && !parent.isLevelEnabled(property)) return noop;
      if (property === 'child') {
        return (more: Bindings) => lazyChild(parent, { ...bindingsOf(lazy), ...more });
      }
    }
    const logger = real(lazy);
    const value: unknown = Reflect.get(logger, property);
    return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(logger) : value;
  },
};

/**
 * `parent.child(bindings)`, made only when something is logged at an enabled level. A pino child
 * serializes its bindings when it is made, and the Acquire handler makes one per call, whereas
 * a lock cycle at the default level logs nothing (profiled: tens of µs per cycle). `bindings`
 * may be a BindingsSource (a stream), asked for them only then: a logger that never logs keeps
 * no bindings object.
 */
export function lazyChild(parent: Logger, bindings: Bindings | BindingsSource): Logger {
  return new Proxy<LazyChild>({ parent, bindings, child: undefined }, handler) as unknown as Logger;
}
