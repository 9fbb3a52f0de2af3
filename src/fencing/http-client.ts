/*
 * The calling side over HTTP: a held lock's token as the `lockstream-fencing-token` header, for
 * fetch or any other HTTP client.
 */
import { FENCING_HEADER, formatFencingToken, type FencingHolder } from './header.js';

/** `{ 'lockstream-fencing-token': value }` for `holder`: spread into any HTTP client's headers. */
export function fencingHeaders(holder: FencingHolder): Record<string, string> {
  return { [FENCING_HEADER]: formatFencingToken(holder) };
}

/**
 * `fetch(input, init)` with `holder`'s `lockstream-fencing-token` added to the request's headers
 * (those of `init`, else those of a Request `input`), replacing any earlier one. Resolves with
 * fetch's Response: a resource that refuses a stale token answers 409.
 */
export function fencedFetch(
  holder: FencingHolder,
  input: string | URL | Request,
  init: RequestInit = {},
): Promise<Response> {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.set(FENCING_HEADER, formatFencingToken(holder));
  return fetch(input, { ...init, headers });
}
