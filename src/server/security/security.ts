/*
 * Loading the files that secure a server (TLS certificate and key, client CA, access policy,
 * ZooKeeper digest) into its gRPC credentials, its gate and its HTTP authorization.
 */
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { ServerCredentials } from '@grpc/grpc-js';
import { ConfigError, type Config } from '../config.js';
import { AccessPolicy, AccessPolicyError } from './access-policy.js';
import { Gate } from './gate.js';

/** How the gRPC port is secured: its transport credentials, and who gets in. */
export interface Security {
  readonly credentials: ServerCredentials;
  readonly gate: Gate;
  /** TLS on the gRPC port. */
  readonly tls: boolean;
  /** Callers must prove who they are (an access policy, or client certificates). */
  readonly authenticated: boolean;
  /** ZooKeeper digest credentials (`user:password`), from `--zookeeper-digest-file`. */
  readonly zookeeperDigest: string | undefined;
  /** With `--http-auth on`: whether an HTTP `Authorization` header admits its request. */
  readonly admitsHttp: ((authorization: string | undefined) => boolean) | undefined;
}

/**
 * Reads the files `--tls-cert`, `--tls-key`, `--tls-client-ca`, `--auth-file` and
 * `--zookeeper-digest-file` name. Throws ConfigError listing every file that cannot be read or
 * parsed.
 */
export async function loadSecurity(config: Readonly<Config>): Promise<Security> {
  const problems: string[] = [];
  const read = async (flag: string, path: string | undefined): Promise<Buffer | undefined> => {
    if (path === undefined) return undefined;
    try {
      return await readFile(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      problems.push(`${flag} ${JSON.stringify(path)}: cannot read it (${code})`);
      return undefined;
    }
  };
  const [cert, key, clientCa, authFile, digestFile] = await Promise.all([
    read('--tls-cert', config.tlsCert),
    read('--tls-key', config.tlsKey),
    read('--tls-client-ca', config.tlsClientCa),
    read('--auth-file', config.authFile),
    read('--zookeeper-digest-file', config.zookeeperDigestFile),
  ]);
  const zookeeperDigest = digestFile?.toString('utf8').trim();
  if (zookeeperDigest !== undefined && !/^[^:\s]+:\S+$/.test(zookeeperDigest)) {
    problems.push(
      `--zookeeper-digest-file ${JSON.stringify(config.zookeeperDigestFile)}: expected one line, user:password`,
    );
  }
  let policy: AccessPolicy | undefined;
  if (authFile) {
    try {
      policy = AccessPolicy.parse(
        authFile.toString('utf8'),
        `--auth-file ${JSON.stringify(config.authFile)}`,
      );
    } catch (error) {
      if (!(error instanceof AccessPolicyError)) throw error;
      problems.push(...error.problems.map((problem) => `${error.source}: ${problem}`));
    }
  }
  let credentials = ServerCredentials.createInsecure();
  if (cert && key) {
    try {
      // grpc-js would find a bad certificate or key only when binding; say so at start-up.
      createSecureContext({ cert, key, ca: clientCa });
      credentials = ServerCredentials.createSsl(
        clientCa ?? null,
        [{ cert_chain: cert, private_key: key }],
        clientCa !== undefined,
      );
    } catch (error) {
      problems.push(`--tls-cert/--tls-key: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    credentials,
    gate: new Gate(policy),
    tls: cert !== undefined,
    authenticated: policy !== undefined || clientCa !== undefined,
    zookeeperDigest,
    admitsHttp:
      config.httpAuth && policy
        ? (authorization) => policy.httpCaller(authorization) !== undefined
        : undefined,
  };
}
