/*
 * `lockstream token new` and `lockstream token hash`: make bearer tokens, and the SHA-256 of a
 * token that an access policy holds.
 */
import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import { sha256 } from '../server/security/access-policy.js';

/** Bytes of randomness in a new token: 256 bits, base64url without padding (43 characters). */
const TOKEN_BYTES = 32;

/**
 * `lockstream token new` and `lockstream token hash`: bearer tokens for the access policy, which
 * holds only their SHA-256, so the policy file can be shared and reviewed without the secrets.
 */
export function addTokenCommand(program: Command): void {
  const token = program.command('token').description('make bearer tokens for an --auth-file access policy');
  token
    .command('new')
    .description('print a new random token (give it to the caller) and the token_sha256 line for the policy')
    .action(() => {
      const secret = randomBytes(TOKEN_BYTES).toString('base64url');
      process.stdout.write(`token: ${secret}\ntoken_sha256: ${sha256(secret).toString('hex')}\n`);
    });
  token
    .command('hash')
    .description("print the token_sha256 of a token read from stdin (so it stays out of the shell's history)")
    .action(async () => {
      let input = '';
      for await (const chunk of process.stdin) input += String(chunk);
      const secret = input.trim();
      if (secret === '') program.error('token hash: no token on stdin');
      process.stdout.write(`token_sha256: ${sha256(secret).toString('hex')}\n`);
    });
}
