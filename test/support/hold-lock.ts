/**
 * A separate client process for tests: acquires a lock, prints `acquired <token>`, and holds
 * it until it is killed. Run as `node --import tsx test/support/hold-lock.ts <address> <name>`.
 */
import { LockCaller } from './lock-caller.js';

const [address, name] = process.argv.slice(2);
if (!address || !name) throw new Error('usage: hold-lock.ts <address> <name>');
const stream = new LockCaller(address).open({ name, owner: `pid-${process.pid}` });
const token = await stream.acquired();
process.stdout.write(`acquired ${token}\n`);
setInterval(() => {}, 60_000);
