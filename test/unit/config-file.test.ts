import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type Config } from '../../src/server/config.js';
import { SERVE_OPTION_TABLE } from '../../src/server/serve-options.js';

/** The example file docs/configuration.md shows. */
const EXAMPLE_FILE = fileURLToPath(new URL('../../examples/config/lockstream.yaml', import.meta.url));

/** loadConfig with `files` (path -> text) for a file system. */
function load(
  env: Record<string, string | undefined>,
  argv: string[],
  files: Record<string, string> = {},
): Readonly<Config> {
  return loadConfig(env, argv, (path) => {
    const text = files[path];
    if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
    return text;
  });
}

function problemsOf(
  env: Record<string, string | undefined>,
  argv: string[],
  files: Record<string, string> = {},
): readonly string[] {
  try {
    load(env, argv, files);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify({ env, argv, files })}`);
}

/** A value each option accepts that is not its default: flags and file keys alike. */
const SAMPLE: Record<string, string> = {
  '--host': '0.0.0.0',
  '--port': '6000',
  '--zookeeper': 'zk1:2181,zk2:2181/chroot',
  '--zookeeper-digest-file': '/etc/lockstream/zookeeper',
  '--zookeeper-client': 'addon',
  '--zookeeper-watch': 'nodes',
  '--root': '/locks/team-a',
  '--session-timeout': '4s',
  '--connect-timeout': '2500',
  '--keepalive-time': '1m',
  '--keepalive-timeout': '750ms',
  '--shutdown-grace': '0',
  '--drain-delay': '3s',
  '--on-stop': 'release',
  '--max-resume-grace': '2m',
  '--max-streams-per-connection': '10',
  '--max-requests-per-session': '500',
  '--max-waiters-per-lock': '20',
  '--max-message-bytes': '2048',
  '--tls-cert': '/etc/lockstream/tls.crt',
  '--tls-key': '/etc/lockstream/tls.key',
  '--tls-client-ca': '/etc/lockstream/clients.crt',
  '--auth-file': '/etc/lockstream/access.yaml',
  '--http-port': '9090',
  '--http-host': '0.0.0.0',
  '--http-auth': 'on',
  '--log-level': 'debug',
  '--log-format': 'pretty',
};

describe('lockstream serve --config', () => {
  it('takes every flag but --config as a top-level key of the same name without its dashes', () => {
    const inFile = SERVE_OPTION_TABLE.filter((option) => option.fileKey !== undefined);
    expect(inFile.map((option) => `--${option.fileKey}`)).toEqual(Object.keys(SAMPLE));
    expect(SERVE_OPTION_TABLE.filter((option) => option.fileKey === undefined).map((o) => o.flag)).toEqual([
      '--config',
    ]);
    const file = Object.entries(SAMPLE)
      .map(([flag, value]) => `${flag.slice(2)}: ${JSON.stringify(value)}`)
      .join('\n');
    const fromFile = load({}, ['--config', 'all.yaml'], { 'all.yaml': file });
    expect(fromFile).toEqual(load({}, Object.entries(SAMPLE).flat()));
    expect(fromFile).not.toEqual(load({}, []));
  });

  it('ranks flags over environment variables over the file over the defaults', () => {
    const file = 'port: 1001\nroot: /from-file\nsession-timeout: 3s\nlog-level: warn\n';
    const config = load(
      { LOCKSTREAM_CONFIG: 'c.yaml', LOCKSTREAM_PORT: '1002', LOCKSTREAM_ROOT: '/from-env' },
      ['--port', '1003'],
      { 'c.yaml': file },
    );
    expect(config).toMatchObject({
      port: 1003,
      rootPath: '/from-env',
      sessionTimeoutMs: 3_000,
      logLevel: 'warn',
      connectTimeoutMs: 15_000,
    });
  });

  it('takes --config over LOCKSTREAM_CONFIG', () => {
    const config = load({ LOCKSTREAM_CONFIG: 'env.yaml' }, ['--config', 'flag.yaml'], {
      'env.yaml': 'root: /env-file',
      'flag.yaml': 'root: /flag-file',
    });
    expect(config.rootPath).toBe('/flag-file');
  });

  it('reads YAML numbers and booleans as the text a flag would carry, and a key without a value as absent', () => {
    const config = load({}, ['--config', 'c.yaml'], {
      'c.yaml': 'port: 0\nmax-message-bytes: 4096\nhttp-auth: false\nsession-timeout: 2500\nzookeeper:\n',
    });
    expect(config).toMatchObject({
      port: 0,
      maxMessageBytes: 4096,
      httpAuth: false,
      sessionTimeoutMs: 2_500,
      zookeeper: undefined,
      backend: 'memory',
    });
  });

  it('takes a relative path in a file option from the directory of the file', () => {
    const config = load({}, ['--config', '/etc/lockstream/lockstream.yaml'], {
      '/etc/lockstream/lockstream.yaml':
        'auth-file: access.yaml\ntls-cert: /elsewhere/tls.crt\ntls-key: tls/key.pem',
    });
    expect(config).toMatchObject({
      authFile: '/etc/lockstream/access.yaml',
      tlsCert: '/elsewhere/tls.crt',
      tlsKey: '/etc/lockstream/tls/key.pem',
    });
  });

  it('is the defaults when the file is empty or only comments', () => {
    expect(load({}, ['--config', 'empty.yaml'], { 'empty.yaml': '' })).toEqual(load({}, []));
    expect(load({}, ['--config', 'c.yaml'], { 'c.yaml': '# nothing yet\n' })).toEqual(load({}, []));
  });

  it('refuses unknown keys, naming each with the file and the key meant', () => {
    expect(
      problemsOf({}, ['--config', 'c.yaml'], {
        'c.yaml': 'prot: 50051\nsessionTimeout: 3s\n--root: /x\nconfig: other.yaml\ncolour: blue\n',
      }),
    ).toEqual([
      'c.yaml: unknown key "prot" (did you mean port?)',
      'c.yaml: unknown key "sessionTimeout" (did you mean session-timeout?)',
      'c.yaml: unknown key "--root" (did you mean root?)',
      'c.yaml: unknown key "config": a configuration file cannot name another',
      'c.yaml: unknown key "colour"',
    ]);
  });

  it('refuses bad values, naming the file, the key and the value, with every other problem at once', () => {
    expect(
      problemsOf({ LOCKSTREAM_LOG_FORMAT: 'xml' }, ['--config', 'c.yaml', '--max-waiters-per-lock', '0'], {
        'c.yaml': [
          'port: 70000',
          'session-timeout: soon',
          'on-stop: linger',
          'log-level: [debug]',
          'root: { path: /x }',
          'http-auth: maybe',
        ].join('\n'),
      }),
    ).toEqual([
      'c.yaml: log-level ["debug"]: expected one value (text, a number, true or false), not a list',
      'c.yaml: root {"path":"/x"}: expected one value (text, a number, true or false), not a mapping',
      'c.yaml: port "70000": expected a port number from 0 to 65535',
      'LOCKSTREAM_LOG_FORMAT "xml": expected one of json, pretty, auto',
      'c.yaml: on-stop "linger": expected one of hand-over, release',
      'c.yaml: http-auth "maybe": expected on or off',
      'c.yaml: session-timeout "soon": expected a duration of at least 1 ms, e.g. 10s or 500ms',
      '--max-waiters-per-lock "0": expected a whole number from 1 to 2147483647',
    ]);
  });

  it('refuses a file that is missing, not YAML, or not a mapping, naming it', () => {
    expect(problemsOf({}, ['--config', 'gone.yaml'])).toEqual([
      '--config "gone.yaml": cannot read the configuration file: no such file',
    ]);
    expect(problemsOf({ LOCKSTREAM_CONFIG: 'gone.yaml' }, [])).toEqual([
      'LOCKSTREAM_CONFIG "gone.yaml": cannot read the configuration file: no such file',
    ]);
    expect(problemsOf({}, ['--config', 'c.yaml'], { 'c.yaml': 'port: [\n' })[0]).toMatch(
      /^c\.yaml: not valid YAML: .*line 2/,
    );
    expect(problemsOf({}, ['--config', 'c.yaml'], { 'c.yaml': 'port: 1\nport: 2\n' })[0]).toMatch(
      /^c\.yaml: not valid YAML: Map keys must be unique/,
    );
    expect(problemsOf({}, ['--config', 'c.yaml'], { 'c.yaml': '- port: 1\n' })).toEqual([
      'c.yaml: expected a mapping of option keys to values (port: 50051), not a list',
    ]);
    expect(problemsOf({}, ['--config', 'c.yaml'], { 'c.yaml': '50051\n' })).toEqual([
      'c.yaml: expected a mapping of option keys to values (port: 50051), not a number',
    ]);
  });

  it('loads the example file of docs/configuration.md', () => {
    expect(loadConfig({}, ['--config', EXAMPLE_FILE])).toMatchObject({
      host: '0.0.0.0',
      port: 50051,
      backend: 'zookeeper',
      zookeeper: 'zk1:2181,zk2:2181,zk3:2181',
      rootPath: '/lockstream',
      sessionTimeoutMs: 10_000,
      onStop: 'hand-over',
      drainDelayMs: 5_000,
      httpHost: '0.0.0.0',
      httpPort: 9464,
      logFormat: 'json',
    });
  });
});
