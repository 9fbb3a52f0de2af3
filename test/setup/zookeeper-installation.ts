/**
 * Where ZooKeeper is installed, and how one of its servers is started: the JVM command line and
 * the files every test server shares (logging configuration, common zoo.cfg lines).
 *
 * Why spawn `java` directly instead of `zkServer.sh start`:
 * - `zkServer.sh start` daemonises (nohup + `&`) and leaves a pid file, so we would not own the
 *   JVM's pid and could not reliably kill exactly our server in teardown.
 * - Either mode sources zkEnv.sh, which on Debian is a symlink to /etc/zookeeper/conf/environment
 *   (an alternatives-managed, admin-editable file). It assigns ZOO_LOG_DIR=/var/log/zookeeper and
 *   ZOO_LOG4J_PROP unconditionally, so those env vars cannot be overridden from outside, and it
 *   also turns on JMX remote flags. Nothing under /etc is read here; the equivalent settings are
 *   passed as -D flags (zookeeper.log.dir, zookeeper.root.logger, log4j.configuration).
 * - Debian's stock classpath (/etc/zookeeper/conf:/usr/share/java/zookeeper.jar) has no SLF4J
 *   binding, so the server silently logs nothing (SLF4J "NOP logger"). We add the log4j 1.2
 *   binding ourselves so a failed start comes with a useful log tail.
 */
import { accessSync, constants as fsConstants, existsSync } from 'node:fs';
import path from 'node:path';

export interface ZooKeeperInstallation {
  /** Absolute path of the `java` executable. */
  java: string;
  /** `-cp` value: ZooKeeper's jar (its manifest Class-Path pulls in its dependencies) + logging. */
  classpath: string;
  /** How the server's SLF4J logging is wired; `none` means the server will log nothing. */
  logging: 'log4j' | 'slf4j-simple' | 'none';
}

const DEBIAN_JAVA_DIR = '/usr/share/java';
/** Escape hatch for non-Debian machines: a full classpath, e.g. "/opt/zookeeper/lib/*". */
const CLASSPATH_ENV = 'LOCKSTREAM_ZK_CLASSPATH';

/**
 * Locates java and the ZooKeeper server jars, or returns null when either is missing.
 * Looks at $LOCKSTREAM_ZK_CLASSPATH first, then Debian's layout (packages `zookeeper` and
 * `libzookeeper-java`, which put every jar flat in /usr/share/java).
 */
export function findZooKeeperInstallation(): ZooKeeperInstallation | null {
  const java = findJava();
  if (java === null) return null;

  const override = process.env[CLASSPATH_ENV];
  if (override !== undefined && override !== '') {
    return { java, classpath: override, logging: 'none' };
  }

  const jar = (name: string): string | null => {
    const file = path.join(DEBIAN_JAVA_DIR, name);
    return existsSync(file) ? file : null;
  };
  const zookeeperJar = jar('zookeeper.jar');
  if (zookeeperJar === null) return null;

  // zookeeper.jar's manifest Class-Path lists its runtime deps (jute, netty, slf4j-api, jetty,
  // ...) by absolute path, but no SLF4J binding: add one, preferring the log4j 1.2 binding that
  // Debian's own /etc/zookeeper/conf/log4j.properties is written for.
  const slf4jLog4j = jar('slf4j-log4j12.jar');
  const log4j = jar('log4j-1.2.jar');
  if (slf4jLog4j !== null && log4j !== null) {
    return { java, classpath: [zookeeperJar, slf4jLog4j, log4j].join(':'), logging: 'log4j' };
  }
  const slf4jSimple = jar('slf4j-simple.jar');
  if (slf4jSimple !== null) {
    return { java, classpath: [zookeeperJar, slf4jSimple].join(':'), logging: 'slf4j-simple' };
  }
  return { java, classpath: zookeeperJar, logging: 'none' };
}

function findJava(): string | null {
  const candidates: string[] = [];
  const javaHome = process.env['JAVA_HOME'];
  if (javaHome !== undefined && javaHome !== '') {
    candidates.push(path.join(javaHome, 'bin', 'java'));
  }
  candidates.push('/usr/bin/java');
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    if (dir !== '') candidates.push(path.join(dir, 'java'));
  }
  for (const candidate of candidates) {
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return null;
}

/** The installation, or an error that says how to get one. */
export function requireZooKeeperInstallation(): ZooKeeperInstallation {
  const installation = findZooKeeperInstallation();
  if (installation === null) {
    throw new Error(
      `ZooKeeper is not installed: need java and ${DEBIAN_JAVA_DIR}/zookeeper.jar ` +
        `(run scripts/install-test-deps.sh, or set ${CLASSPATH_ENV}).`,
    );
  }
  return installation;
}

/** The JVM command line (after `java`) for one ZooKeeper server; servers differ only in their zoo.cfg. */
export function zooKeeperJvmArgs(
  installation: ZooKeeperInstallation,
  files: { logDir: string; log4jFile: string; configFile: string; production?: boolean; skipAcl?: boolean },
): string[] {
  return [
    '-Xmx256m',
    '-XX:+UseSerialGC',
    '-Djava.net.preferIPv4Stack=true',
    // Anything that still resolves ${zookeeper.log.dir} must write to our temp dir, not /var/log.
    `-Dzookeeper.log.dir=${files.logDir}`,
    ...loggingFlags(installation, files.log4jFile),
    // Redundant with the zoo.cfg key (which the config parser copies into this property), kept
    // so the command line alone shows that every four-letter word is allowed.
    '-Dzookeeper.4lw.commands.whitelist=*',
    // Not settable from zoo.cfg: unknown cfg keys become "zookeeper."-prefixed system properties,
    // and ContainerManager reads the unprefixed name. The default is 60 s; with 1 s, empty
    // CONTAINER znodes (that once had children) vanish within a couple of seconds.
    ...(files.production ? [] : ['-Dznode.container.checkIntervalMs=1000']),
    // No ACL checks at all: lets any client reconfigure the ensemble (only the super user may
    // otherwise). For the throwaway ensembles of membership tests only (`dynamic`).
    ...(files.skipAcl ? ['-Dzookeeper.skipACL=yes'] : []),
    '-cp',
    installation.classpath,
    // QuorumPeerMain is what zkServer.sh runs; with no server.N entries it runs standalone.
    'org.apache.zookeeper.server.quorum.QuorumPeerMain',
    files.configFile,
  ];
}

/** zoo.cfg lines every test server has, standalone or in an ensemble. */
export const SHARED_ZOO_CFG: readonly string[] = [
  // The AdminServer (Jetty) listens on 8080 by default: two servers would collide.
  'admin.enableServer=false',
  '4lw.commands.whitelist=*',
  // Allows TTL nodes; harmless otherwise.
  'extendedTypesEnabled=true',
  // Throwaway data: skip the fsync per transaction (large speed-up on slow CI disks) and the
  // 64 MB txn-log preallocation.
  'forceSync=no',
  'preAllocSize=1024',
];

/** Console-only log4j 1.2 config: the server's output goes to our pipe, never to /var/log. */
export const LOG4J_PROPERTIES = [
  'log4j.rootLogger=INFO, CONSOLE',
  'log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender',
  'log4j.appender.CONSOLE.Target=System.out',
  'log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout',
  'log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n',
  '',
].join('\n');

export function loggingFlags(installation: ZooKeeperInstallation, log4jFile: string): string[] {
  switch (installation.logging) {
    case 'log4j':
      return [
        `-Dlog4j.configuration=file:${log4jFile}`,
        // What older upstream scripts derived from ZOO_LOG4J_PROP; Debian's log4j config reads it.
        '-Dzookeeper.root.logger=INFO,CONSOLE',
        // Skip registering log4j MBeans with JMX; nothing here uses them.
        '-Dzookeeper.jmx.log4j.disable=true',
      ];
    case 'slf4j-simple':
      return [
        '-Dorg.slf4j.simpleLogger.defaultLogLevel=info',
        '-Dorg.slf4j.simpleLogger.showDateTime=true',
        '-Dorg.slf4j.simpleLogger.logFile=System.out',
      ];
    case 'none':
      return [];
  }
}
