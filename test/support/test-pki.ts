import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate and its private key, as PEM files and their contents. */
export interface Issued {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

export interface TestPki {
  readonly dir: string;
  /** The CA lockstream trusts for clients, and that signed the server's certificate. */
  readonly ca: Issued;
  /** For `localhost` and 127.0.0.1. */
  readonly server: Issued;
  /** A client certificate from `ca` with a URI SAN (a SPIFFE ID): its identity. */
  readonly spiffeClient: Issued;
  /** A client certificate from `ca` with only a subject CN. */
  readonly cnClient: Issued;
  /** A client certificate from `ca` whose identity no access policy here names. */
  readonly unknownClient: Issued;
  /** A client certificate from a CA lockstream does not trust. */
  readonly strangerClient: Issued;
  /** A client certificate from `ca` that expired yesterday. */
  readonly expiredClient: Issued;
  remove(): Promise<void>;
}

/**
 * Generates a throwaway PKI with openssl (P-256 keys, valid for a day): nothing secret is ever
 * committed, and each run has keys of its own.
 */
export async function createTestPki(): Promise<TestPki> {
  const dir = await mkdtemp(join(tmpdir(), 'lockstream-pki-'));
  let serial = 1;
  const issue = async (
    name: string,
    subject: string,
    signer: Issued | 'self',
    options: { days?: number; san?: string; ca?: boolean } = {},
  ): Promise<Issued> => {
    const keyFile = join(dir, `${name}.key`);
    const certFile = join(dir, `${name}.crt`);
    const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyFile];
    const days = String(options.days ?? 1);
    if (signer === 'self') {
      await run('openssl', ['req', '-x509', ...newKey, '-out', certFile, '-days', days, '-subj', subject]);
    } else {
      const csr = join(dir, `${name}.csr`);
      const extensions = join(dir, `${name}.ext`);
      await writeFile(
        extensions,
        ['basicConstraints=CA:FALSE', ...(options.san ? [`subjectAltName=${options.san}`] : [])].join('\n'),
      );
      await run('openssl', ['req', ...newKey, '-out', csr, '-subj', subject]);
      serial += 1;
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        signer.certFile,
        '-CAkey',
        signer.keyFile,
        '-set_serial',
        String(serial),
        '-days',
        days,
        '-extfile',
        extensions,
        '-out',
        certFile,
      ]);
    }
    return { certFile, keyFile, cert: await readFile(certFile), key: await readFile(keyFile) };
  };
  const ca = await issue('ca', '/CN=lockstream test CA', 'self');
  const otherCa = await issue('other-ca', '/CN=some other CA', 'self');
  const [server, spiffeClient, cnClient, unknownClient, strangerClient, expiredClient] = await Promise.all([
    issue('server', '/CN=localhost', ca, { san: 'DNS:localhost,IP:127.0.0.1' }),
    issue('spiffe-client', '/CN=ignored when a SAN is there', ca, { san: 'URI:spiffe://example.org/ops' }),
    issue('cn-client', '/CN=batch-runner', ca),
    issue('unknown-client', '/CN=intruder', ca),
    issue('stranger-client', '/CN=batch-runner', otherCa),
    issue('expired-client', '/CN=batch-runner', ca, { days: -1 }),
  ]);
  return {
    dir,
    ca,
    server,
    spiffeClient,
    cnClient,
    unknownClient,
    strangerClient,
    expiredClient,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
