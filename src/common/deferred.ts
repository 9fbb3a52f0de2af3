/** A promise and the function that resolves it, made apart (Promise.withResolvers is Node 22+). */
export function withResolvers(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((settle) => (resolve = settle));
  return { promise, resolve };
}
