/**
 * A candidate in a process of its own, for bench/elections.ts: campaigns in election `NAME`
 * through the SDK with its default options (a 5 s resume grace), prints
 * `{"event":"elected","term":"…"}` once elected, and leads until it is killed.
 *
 * `node --import tsx bench/election-candidate.ts SERVER NAME`
 */
import { LockClient } from '../dist/client/index.js';

const [server, name] = process.argv.slice(2);
if (!server || !name) throw new Error('usage: election-candidate.ts SERVER NAME');
const client = new LockClient(server);
const leadership = await client.campaign(name, 'candidate process');
process.stdout.write(`${JSON.stringify({ event: 'elected', term: leadership.term.toString() })}\n`);
// Leads until killed.
setInterval(() => {}, 60_000);
