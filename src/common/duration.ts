/*
 * A duration given on the command line (`500ms`, `10s`, `2m`, or plain milliseconds), read as
 * milliseconds.
 */
import parseDuration from 'ms';

/**
 * A command-line duration in milliseconds: `ms`-style (`500ms`, `10s`, `2m`) or plain digits.
 * Undefined for an empty string or nonsense (`ms` throws on the one and returns undefined for
 * the other). Not rounded, and not checked against a minimum: that is the caller's.
 */
export function parseDurationMs(raw: string): number | undefined {
  if (raw.trim() === '') return undefined;
  const parsed = /^\d+$/.test(raw) ? Number(raw) : parseDuration(raw as parseDuration.StringValue);
  return typeof parsed === 'number' && Number.isFinite(parsed) ? parsed : undefined;
}
