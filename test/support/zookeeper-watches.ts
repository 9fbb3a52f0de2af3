import { sendFourLetterWord } from '../setup/zookeeper-process.js';

/**
 * ZooKeeper's own table of watches (the `wchp` four-letter word) on the server at `port`:
 * watched path -> sessions watching it, for the paths under `prefix`.
 */
export async function watchesUnder(port: number, prefix: string): Promise<Map<string, string[]>> {
  const watches = new Map<string, string[]>();
  let path: string | undefined;
  for (const line of (await sendFourLetterWord(port, 'wchp', 5_000)).split('\n')) {
    if (line.trim() === '') continue;
    if (/^\s/.test(line)) {
      if (path !== undefined) watches.get(path)?.push(line.trim());
    } else {
      path = line.trim();
      if (path.startsWith(prefix)) watches.set(path, []);
      else path = undefined;
    }
  }
  return watches;
}
