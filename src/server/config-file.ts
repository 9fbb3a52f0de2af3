/*
 * Reading a `lockstream serve --config` file: a YAML mapping whose keys are the serve options'
 * flags without their dashes, checked against the options table (serve-options.ts) and turned
 * into the text a flag would have carried.
 */
import { dirname, isAbsolute, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { SERVE_OPTION_TABLE, type ServeOption } from './serve-options.js';

/** What a configuration file says, and what is wrong with it. */
export interface ConfigFile {
  /** The file as it was named (flag or LOCKSTREAM_CONFIG), for messages. */
  readonly path: string;
  /** Each key's value as a flag would give it, by the option's attribute (`sessionTimeout`). */
  readonly values: Readonly<Record<string, string>>;
  /** The attribute of each option the file set, and the key it was set by. */
  readonly keys: ReadonlyMap<string, string>;
  /** Every problem found: each names the file, and the key and value where there is one. */
  readonly problems: readonly string[];
}

const FILE_OPTIONS: readonly ServeOption[] = SERVE_OPTION_TABLE.filter(
  (option) => option.fileKey !== undefined,
);

/** One value per key: text, a number or true/false; null (`key:` alone) is as if the key were absent. */
const SCALAR = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** The file's schema, from the options table: every option's key, and no other. */
const FILE_SCHEMA = z.strictObject(
  Object.fromEntries(FILE_OPTIONS.map((option) => [option.fileKey, SCALAR.optional()])),
);

/**
 * Reads and checks the configuration file at `path` (named by `namedBy`, the flag or the
 * environment variable, in a problem reading it). Never throws for the file's own faults
 * (missing, not YAML, an unknown key, a list where a value goes): they are returned as problems,
 * to be reported with every other problem at once. A relative path in a `<file>` option is
 * taken from the file's own directory, so the file means the same from wherever it is used.
 */
export function readConfigFile(
  path: string,
  readFile: (path: string) => string,
  namedBy = '--config',
): ConfigFile {
  const keys = new Map<string, string>();
  const failed = (problem: string): ConfigFile => ({ path, values: {}, keys, problems: [problem] });
  let text: string;
  try {
    text = readFile(path);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : String(error);
    return failed(`${namedBy} ${JSON.stringify(path)}: cannot read the configuration file: ${reason}`);
  }
  const document = parseDocument(text);
  if (document.errors.length > 0) {
    const first = document.errors[0]!;
    const line = (first.message.split('\n')[0] ?? first.message).replace(/:$/, '');
    return failed(`${path}: not valid YAML: ${line}`);
  }
  const parsed: unknown = document.toJS() ?? {};
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return failed(
      `${path}: expected a mapping of option keys to values (port: 50051), not ${shapeOf(parsed)}`,
    );
  }
  const content = parsed as Record<string, unknown>;
  const refused = new Map<string, string>();
  for (const issue of FILE_SCHEMA.safeParse(content).error?.issues ?? []) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        refused.set(key, `${path}: unknown key ${JSON.stringify(key)}${suggestionFor(key)}`);
      }
    } else {
      const key = String(issue.path[0]);
      const value = content[key];
      refused.set(
        key,
        `${path}: ${key} ${JSON.stringify(value)}: expected one value (text, a number, true or false), not ${shapeOf(value)}`,
      );
    }
  }
  // In the order of the file, to be fixed from top to bottom.
  const problems = Object.keys(content).flatMap((key) => refused.get(key) ?? []);
  const values: Record<string, string> = {};
  for (const option of FILE_OPTIONS) {
    const key = option.fileKey!;
    const value = content[key];
    if (refused.has(key) || !isScalar(value)) continue;
    let text = String(value);
    if (option.argument === '<file>' && text !== '' && !isAbsolute(text)) {
      text = resolve(dirname(resolve(path)), text);
    }
    values[option.attribute] = text;
    keys.set(option.attribute, key);
  }
  return { path, values, keys, problems };
}

/** The key meant, for a key that differs from one only in spelling (`sessionTimeout`, `--port`, `prot`). */
function suggestionFor(key: string): string {
  if (key === 'config') return ': a configuration file cannot name another';
  const squashed = squash(key);
  const near = FILE_OPTIONS.map((option) => option.fileKey!).find(
    (known) => squash(known) === squashed || editDistance(known, key) <= 2,
  );
  return near === undefined ? '' : ` (did you mean ${near}?)`;
}

function squash(key: string): string {
  return key.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/** Levenshtein distance, for the few short keys of the table. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}

function isScalar(value: unknown): value is string | number | boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}

function shapeOf(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'nothing';
  if (typeof value === 'object') return 'a mapping';
  return `a ${typeof value}`;
}
