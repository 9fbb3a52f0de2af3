import type { Bindings, Logger } from 'pino';

const noop = (): void => {};

/**
 * `parent.child(bindings)`, made only when something is logged at an enabled level. A pino child
 * serializes its bindings when it is made, and the Acquire handler makes one per call, whereas
 * a lock cycle at the default level logs nothing (profiled: tens of µs per cycle).
 */
export function lazyChild(parent: Logger, bindings: Bindings): Logger {
  let child: Logger | undefined;
  const real = (): Logger => (child ??= parent.child(bindings));
  return new Proxy(parent, {
    get(target, property) {
      if (typeof property === 'string') {
        if (property in target.levels.values && !target.isLevelEnabled(property)) return noop;
        if (property === 'child') {
          return (more: Bindings) => lazyChild(parent, { ...bindings, ...more });
        }
      }
      const value: unknown = Reflect.get(real(), property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(real()) : value;
    },
  });
}
