/** An unsubscribe function as a Disposable, for `using`. */
export function disposable(unsubscribe: () => void): Disposable {
  return { [Symbol.dispose]: unsubscribe };
}
