/*
 * The endpoints a LockClient is made with, checked: one gRPC target, or a list of distinct,
 * well-formed `host:port`.
 */
import { invalidArgument } from './request-checks.js';

/**
 * `host:port`: a DNS name, an IPv4 address or a bracketed IPv6 address, and a port from 1 to
 * 65535.
 */
const HOST_PORT =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+(?:%[\w.-]+)?\]):(\d{1,5})$/;

/**
 * The endpoints a LockClient is made with: one address (any gRPC target, as given), or a list of
 * `host:port`, which must be non-empty, well formed and without duplicates. Refuses a bad list
 * with LockClientError (INVALID_ARGUMENT) naming the problem.
 */
export function endpointList(address: string | readonly string[]): readonly string[] {
  if (typeof address === 'string') return [address];
  if (!Array.isArray(address)) {
    throw invalidArgument('', `address must be a string or an array of "host:port", not ${typeof address}`);
  }
  if (address.length === 0) {
    throw invalidArgument('', 'addresses is empty: give at least one "host:port"');
  }
  const list: readonly unknown[] = address;
  const seen = new Map<string, number>();
  return list.map((endpoint, index) => {
    if (typeof endpoint !== 'string') {
      throw invalidArgument('', `addresses[${index}] must be a string "host:port", not ${typeof endpoint}`);
    }
    const port = HOST_PORT.exec(endpoint)?.[1];
    if (port === undefined) {
      throw invalidArgument(
        '',
        `addresses[${index}] ${JSON.stringify(endpoint)} is not "host:port" (a DNS name, IPv4 address or [IPv6] address, then a port)`,
      );
    }
    if (Number(port) < 1 || Number(port) > 65_535) {
      throw invalidArgument(
        '',
        `addresses[${index}] ${JSON.stringify(endpoint)}: port ${port} is not 1 to 65535`,
      );
    }
    // Host names are case-insensitive: the same server twice would be tried twice per round.
    const key = endpoint.toLowerCase();
    const first = seen.get(key);
    if (first !== undefined) {
      throw invalidArgument(
        '',
        `addresses[${index}] ${JSON.stringify(endpoint)} is the same endpoint as addresses[${first}]`,
      );
    }
    seen.set(key, index);
    return endpoint;
  });
}
