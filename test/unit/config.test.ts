import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, DEFAULTS, loadConfig } from '../../src/server/config.js';

/** The ConfigError loadConfig throws for these inputs. */
function problemsOf(env: Record<string, string | undefined>, argv: string[]): readonly string[] {
  try {
    loadConfig(env, argv);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify({ env, argv })}`);
}

describe('loadConfig', () => {
  it('defaults to the memory back end on 127.0.0.1:50051 with root /lockstream and a 10 s session', () => {
    expect(loadConfig({}, [])).toEqual({
      host: '127.0.0.1',
      port: 50051,
      backend: 'memory',
      zookeeper: undefined,
      zookeeperClient: 'protocol',
      zookeeperWatch: 'tree',
      rootPath: '/lockstream',
      sessionTimeoutMs: 10_000,
      connectTimeoutMs: 15_000,
      keepaliveTimeMs: 3_000,
      keepaliveTimeoutMs: 3_000,
      shutdownGraceMs: 5_000,
      drainDelayMs: 0,
      onStop: 'hand-over',
      maxResumeGraceMs: 60_000,
      maxStreamsPerConnection: 1000,
      maxRequestsPerSession: 100_000,
      maxWaitersPerLock: 10_000,
      maxMessageBytes: 10_240,
      httpHost: '127.0.0.1',
      httpPort: undefined,
      logLevel: 'info',
      logFormat: 'auto',
      tlsCert: undefined,
      tlsKey: undefined,
      tlsClientCa: undefined,
      authFile: undefined,
      zookeeperDigestFile: undefined,
      httpAuth: false,
    });
    expect(DEFAULTS.rootPath).toBe('/lockstream');
  });

  it('returns a frozen config', () => {
    expect(Object.isFrozen(loadConfig({}, []))).toBe(true);
  });

  it('reads every flag', () => {
    const config = loadConfig({}, [
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--zookeeper',
      'zk1:2181,zk2:2181/chroot',
      '--root',
      '/locks/team-a',
      '--session-timeout',
      '4s',
      '--connect-timeout',
      '2500',
      '--keepalive-time',
      '1m',
      '--keepalive-timeout',
      '750ms',
      '--on-stop',
      'release',
      '--shutdown-grace',
      '0',
      '--drain-delay',
      '4s',
      '--max-resume-grace',
      '2m',
      '--max-streams-per-connection',
      '10',
      '--max-requests-per-session',
      '500',
      '--max-waiters-per-lock',
      '20',
      '--max-message-bytes',
      '2048',
      '--http-port',
      '9090',
      '--http-host',
      '0.0.0.0',
      '--log-level',
      'debug',
      '--log-format',
      'pretty',
      '--tls-cert',
      'server.crt',
      '--tls-key',
      'server.key',
      '--tls-client-ca',
      'clients-ca.crt',
      '--auth-file',
      'access.yaml',
      '--http-auth',
      'on',
      '--zookeeper-digest-file',
      'zk-digest',
      '--zookeeper-client',
      'addon',
      '--zookeeper-watch',
      'nodes',
    ]);
    expect(config).toEqual({
      host: '0.0.0.0',
      port: 0,
      backend: 'zookeeper',
      zookeeper: 'zk1:2181,zk2:2181/chroot',
      zookeeperClient: 'addon',
      zookeeperWatch: 'nodes',
      rootPath: '/locks/team-a',
      sessionTimeoutMs: 4_000,
      connectTimeoutMs: 2_500,
      keepaliveTimeMs: 60_000,
      keepaliveTimeoutMs: 750,
      shutdownGraceMs: 0,
      drainDelayMs: 4_000,
      onStop: 'release',
      maxResumeGraceMs: 120_000,
      maxStreamsPerConnection: 10,
      maxRequestsPerSession: 500,
      maxWaitersPerLock: 20,
      maxMessageBytes: 2048,
      httpHost: '0.0.0.0',
      httpPort: 9090,
      logLevel: 'debug',
      logFormat: 'pretty',
      tlsCert: 'server.crt',
      tlsKey: 'server.key',
      tlsClientCa: 'clients-ca.crt',
      authFile: 'access.yaml',
      zookeeperDigestFile: 'zk-digest',
      httpAuth: true,
    });
  });

  it('needs both halves of TLS, TLS for client certificates, and an access policy for HTTP auth', () => {
    expect(problemsOf({}, ['--tls-key', 'k.pem', '--tls-client-ca', 'ca.pem', '--http-auth', 'on'])).toEqual([
      '--tls-cert and --tls-key: give both (TLS) or neither (plaintext)',
      '--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked over TLS',
      '--http-auth on needs --auth-file: the callers allowed on the HTTP port are named there',
    ]);
    expect(problemsOf({}, ['--http-auth', 'maybe'])).toEqual(['--http-auth "maybe": expected on or off']);
    expect(problemsOf({}, ['--on-stop', 'linger'])).toEqual([
      '--on-stop "linger": expected one of hand-over, release',
    ]);
    expect(problemsOf({}, ['--zookeeper-digest-file', 'zk-digest'])).toEqual([
      '--zookeeper-digest-file needs --zookeeper: the embedded store has no ACLs',
    ]);
  });

  it('accepts the --flag=value form', () => {
    expect(loadConfig({}, ['--port=7000', '--zookeeper=127.0.0.1:2181'])).toMatchObject({
      port: 7000,
      backend: 'zookeeper',
      zookeeper: '127.0.0.1:2181',
    });
  });

  it('reads every environment variable', () => {
    const config = loadConfig(
      {
        LOCKSTREAM_HOST: '::1',
        LOCKSTREAM_PORT: '6000',
        LOCKSTREAM_ZOOKEEPER: 'zk:2181',
        LOCKSTREAM_ZOOKEEPER_CLIENT: 'addon',
        LOCKSTREAM_ROOT: '/from-env',
        LOCKSTREAM_SESSION_TIMEOUT: '6s',
        LOCKSTREAM_CONNECT_TIMEOUT: '3s',
        LOCKSTREAM_KEEPALIVE_TIME: '2s',
        LOCKSTREAM_KEEPALIVE_TIMEOUT: '1s',
        LOCKSTREAM_SHUTDOWN_GRACE: '500ms',
        LOCKSTREAM_DRAIN_DELAY: '2s',
        LOCKSTREAM_ON_STOP: 'release',
        LOCKSTREAM_MAX_RESUME_GRACE: '0',
        LOCKSTREAM_MAX_STREAMS_PER_CONNECTION: '11',
        LOCKSTREAM_MAX_REQUESTS_PER_SESSION: '501',
        LOCKSTREAM_MAX_WAITERS_PER_LOCK: '21',
        LOCKSTREAM_MAX_MESSAGE_BYTES: '3000',
        LOCKSTREAM_HTTP_PORT: '0',
        LOCKSTREAM_LOG_LEVEL: 'warn',
        LOCKSTREAM_LOG_FORMAT: 'json',
        LOCKSTREAM_TLS_CERT: '/etc/lockstream/tls.crt',
        LOCKSTREAM_TLS_KEY: '/etc/lockstream/tls.key',
        LOCKSTREAM_TLS_CLIENT_CA: '/etc/lockstream/clients.crt',
        LOCKSTREAM_AUTH_FILE: '/etc/lockstream/access.yaml',
        LOCKSTREAM_HTTP_AUTH: 'true',
        LOCKSTREAM_ZOOKEEPER_DIGEST_FILE: '/etc/lockstream/zookeeper',
        LOCKSTREAM_ZOOKEEPER_WATCH: 'nodes',
      },
      [],
    );
    expect(config).toEqual({
      host: '::1',
      port: 6000,
      backend: 'zookeeper',
      zookeeper: 'zk:2181',
      zookeeperClient: 'addon',
      zookeeperWatch: 'nodes',
      rootPath: '/from-env',
      sessionTimeoutMs: 6_000,
      connectTimeoutMs: 3_000,
      keepaliveTimeMs: 2_000,
      keepaliveTimeoutMs: 1_000,
      shutdownGraceMs: 500,
      drainDelayMs: 2_000,
      onStop: 'release',
      maxResumeGraceMs: 0,
      maxStreamsPerConnection: 11,
      maxRequestsPerSession: 501,
      maxWaitersPerLock: 21,
      maxMessageBytes: 3000,
      httpHost: '127.0.0.1',
      httpPort: 0,
      logLevel: 'warn',
      logFormat: 'json',
      tlsCert: '/etc/lockstream/tls.crt',
      tlsKey: '/etc/lockstream/tls.key',
      tlsClientCa: '/etc/lockstream/clients.crt',
      authFile: '/etc/lockstream/access.yaml',
      zookeeperDigestFile: '/etc/lockstream/zookeeper',
      httpAuth: true,
    });
  });

  it('lets a flag beat its environment variable', () => {
    const config = loadConfig(
      { LOCKSTREAM_PORT: '6000', LOCKSTREAM_ZOOKEEPER: 'env-zk:2181', LOCKSTREAM_LOG_LEVEL: 'warn' },
      ['--port', '7000', '--zookeeper', 'flag-zk:2181', '--log-level', 'error'],
    );
    expect(config).toMatchObject({ port: 7000, zookeeper: 'flag-zk:2181', logLevel: 'error' });
  });

  it('ignores unrelated environment variables', () => {
    expect(loadConfig({ PORT: '1', LOCKSTREAM_UNKNOWN: 'x', HOME: '/root' }, [])).toEqual(loadConfig({}, []));
  });

  describe('durations', () => {
    it.each([
      ['500ms', 500],
      ['10s', 10_000],
      ['1.5s', 1_500],
      ['2m', 120_000],
      ['1h', 3_600_000],
      ['2500', 2_500],
      ['1', 1],
    ])('reads %s as %i ms', (raw, ms) => {
      expect(loadConfig({}, ['--session-timeout', raw]).sessionTimeoutMs).toBe(ms);
    });

    it('rounds fractional milliseconds', () => {
      expect(loadConfig({}, ['--session-timeout', '1.6ms']).sessionTimeoutMs).toBe(2);
    });

    it.each(['soon', '10 parsecs', 'ms', '0', '0s'])(
      'rejects session timeout %j, which is not a duration of at least 1 ms',
      (raw) => {
        expect(problemsOf({}, ['--session-timeout', raw])).toEqual([
          `--session-timeout ${JSON.stringify(raw)}: expected a duration of at least 1 ms, e.g. 10s or 500ms`,
        ]);
      },
    );

    it('reports an empty duration (flag or environment) as a problem rather than throwing a bare Error', () => {
      expect(problemsOf({}, ['--session-timeout', ''])).toEqual([
        '--session-timeout "": expected a duration of at least 1 ms, e.g. 10s or 500ms',
      ]);
      expect(problemsOf({ LOCKSTREAM_SHUTDOWN_GRACE: '' }, [])).toEqual([
        'LOCKSTREAM_SHUTDOWN_GRACE "": expected a duration of at least 0 ms, e.g. 10s or 500ms',
      ]);
    });

    it('rejects a negative duration', () => {
      expect(problemsOf({ LOCKSTREAM_CONNECT_TIMEOUT: '-5s' }, [])).toEqual([
        'LOCKSTREAM_CONNECT_TIMEOUT "-5s": expected a duration of at least 1 ms, e.g. 10s or 500ms',
      ]);
    });

    it('allows a shutdown grace of 0 but no other duration of 0', () => {
      expect(loadConfig({}, ['--shutdown-grace', '0']).shutdownGraceMs).toBe(0);
      expect(problemsOf({}, ['--keepalive-time', '0'])).toHaveLength(1);
    });
  });

  describe('validation', () => {
    it.each(['65536', '-1', '1.5', 'http', '99999999'])('rejects port %j', (raw) => {
      expect(problemsOf({}, [`--port=${raw}`])).toEqual([
        `--port ${JSON.stringify(raw)}: expected a port number from 0 to 65535`,
      ]);
    });

    it('accepts ports 0 and 65535', () => {
      expect(loadConfig({}, ['--port', '0']).port).toBe(0);
      expect(loadConfig({}, ['--port', '65535']).port).toBe(65535);
    });

    it('rejects an empty port (flag or LOCKSTREAM_PORT) instead of reading it as 0, a random port', () => {
      expect(problemsOf({}, ['--port', ''])).toEqual(['--port "": expected a port number from 0 to 65535']);
      expect(problemsOf({ LOCKSTREAM_PORT: '' }, [])).toEqual([
        'LOCKSTREAM_PORT "": expected a port number from 0 to 65535',
      ]);
      expect(problemsOf({ LOCKSTREAM_PORT: ' ' }, [])).toEqual([
        'LOCKSTREAM_PORT " ": expected a port number from 0 to 65535',
      ]);
    });

    it.each(['lockstream', '/', '/a/', '//a', '/a//b', ''])('rejects root %j', (raw) => {
      expect(problemsOf({}, ['--root', raw])).toEqual([
        `--root ${JSON.stringify(raw)}: expected an absolute znode path like /lockstream`,
      ]);
    });

    it('accepts nested roots', () => {
      expect(loadConfig({}, ['--root', '/a/b/c']).rootPath).toBe('/a/b/c');
    });

    it.each(['', 'zk1:2181, zk2:2181', 'zk1:2181,,zk2:2181', ',zk:2181', 'zk:2181 /chroot'])(
      'rejects ZooKeeper connect string %j',
      (raw) => {
        expect(problemsOf({}, ['--zookeeper', raw])).toEqual([
          `--zookeeper ${JSON.stringify(raw)}: expected host:port[,host:port...][/chroot]`,
        ]);
      },
    );

    it('accepts ZooKeeper connect strings with several hosts and a chroot', () => {
      for (const raw of [
        'zk:2181',
        '10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181',
        'zk:2181/apps/locks',
        '[::1]:2181',
      ]) {
        expect(loadConfig({}, ['--zookeeper', raw]).zookeeper).toBe(raw);
      }
    });

    it('takes the ZooKeeper client from the environment, and names the choices for an unknown one', () => {
      expect(loadConfig({ LOCKSTREAM_ZOOKEEPER_CLIENT: 'addon' }, []).zookeeperClient).toBe('addon');
      expect(problemsOf({}, ['--zookeeper-client', 'curator'])).toEqual([
        '--zookeeper-client "curator": expected one of protocol, addon',
      ]);
    });

    it('takes how to watch ZooKeeper from the flag or the environment, and names the choices for an unknown one', () => {
      expect(loadConfig({}, ['--zookeeper-watch', 'nodes']).zookeeperWatch).toBe('nodes');
      expect(loadConfig({ LOCKSTREAM_ZOOKEEPER_WATCH: 'nodes' }, []).zookeeperWatch).toBe('nodes');
      expect(problemsOf({}, ['--zookeeper-watch', 'every'])).toEqual([
        '--zookeeper-watch "every": expected one of tree, nodes',
      ]);
    });

    it('rejects an unknown log level from the environment', () => {
      expect(problemsOf({ LOCKSTREAM_LOG_LEVEL: 'loud' }, [])).toEqual([
        'LOCKSTREAM_LOG_LEVEL "loud": expected one of trace, debug, info, warn, error, fatal, silent',
      ]);
    });

    it('rejects an unknown log level flag', () => {
      const problems = problemsOf({}, ['--log-level', 'loud']);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/log-level/);
      expect(problems[0]).toMatch(/loud/);
    });

    it('rejects an unknown log format, naming it', () => {
      const problems = problemsOf({}, ['--log-format', 'xml']);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/log-format "xml"/);
      expect(problems[0]).toMatch(/json, pretty, auto/);
    });

    it('accepts every log level', () => {
      for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']) {
        expect(loadConfig({}, ['--log-level', level]).logLevel).toBe(level);
      }
    });

    it('reports unknown options and stray arguments', () => {
      expect(problemsOf({}, ['--bogus'])).toEqual(["unknown option '--bogus'"]);
      expect(problemsOf({}, ['extra'])).toHaveLength(1);
    });

    it('reports every problem at once, in a message that lists them', () => {
      let thrown: unknown;
      try {
        loadConfig({ LOCKSTREAM_KEEPALIVE_TIME: 'often' }, [
          '--port',
          '70000',
          '--root',
          'relative',
          '--zookeeper',
          'a b',
          '--session-timeout',
          'soon',
        ]);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      const error = thrown as ConfigError;
      expect(error.problems).toEqual([
        '--port "70000": expected a port number from 0 to 65535',
        '--root "relative": expected an absolute znode path like /lockstream',
        '--zookeeper "a b": expected host:port[,host:port...][/chroot]',
        '--session-timeout "soon": expected a duration of at least 1 ms, e.g. 10s or 500ms',
        'LOCKSTREAM_KEEPALIVE_TIME "often": expected a duration of at least 1 ms, e.g. 10s or 500ms',
      ]);
      for (const problem of error.problems) expect(error.message).toContain(problem);
    });

    it('rejects limits that are not whole numbers in range, naming the range', () => {
      expect(problemsOf({}, ['--max-waiters-per-lock', '0', '--max-streams-per-connection', '1.5'])).toEqual([
        '--max-streams-per-connection "1.5": expected a whole number from 1 to 2147483647',
        '--max-waiters-per-lock "0": expected a whole number from 1 to 2147483647',
      ]);
      expect(problemsOf({ LOCKSTREAM_MAX_MESSAGE_BYTES: '100' }, [])).toEqual([
        'LOCKSTREAM_MAX_MESSAGE_BYTES "100": expected a whole number from 1024 to 4194304',
      ]);
    });

    it('reports an invalid --log-level flag together with the other problems', () => {
      const problems = problemsOf({}, ['--port', '70000', '--log-level', 'loud', '--root', 'relative']);
      expect(problems).toHaveLength(3);
      expect(problems.some((p) => p.startsWith('--port'))).toBe(true);
      expect(problems.some((p) => p.startsWith('--root'))).toBe(true);
      expect(problems.some((p) => p.includes('loud'))).toBe(true);
    });
  });

  describe('purity', () => {
    const saved = { port: process.env['LOCKSTREAM_PORT'], zookeeper: process.env['LOCKSTREAM_ZOOKEEPER'] };

    afterEach(() => {
      for (const [key, value] of [
        ['LOCKSTREAM_PORT', saved.port],
        ['LOCKSTREAM_ZOOKEEPER', saved.zookeeper],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    });

    it('does not read process.env, only the environment it is given', () => {
      process.env['LOCKSTREAM_PORT'] = '1234';
      process.env['LOCKSTREAM_ZOOKEEPER'] = 'from-process-env:2181';
      expect(loadConfig({}, [])).toMatchObject({ port: 50051, backend: 'memory', zookeeper: undefined });
      expect(loadConfig({ LOCKSTREAM_PORT: '4321' }, []).port).toBe(4321);
    });

    it('does not change the arguments it is given', () => {
      const argv = Object.freeze(['--port', '7000']);
      const env = Object.freeze({ LOCKSTREAM_ROOT: '/x' });
      expect(loadConfig(env, argv)).toMatchObject({ port: 7000, rootPath: '/x' });
      expect(argv).toEqual(['--port', '7000']);
    });
  });
});
