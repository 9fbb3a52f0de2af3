/**
 * Bugs planted on purpose, so that the partition suite (test/jepsen) can prove that its
 * independent checker catches them: a checker that passes everything proves nothing. Chosen by
 * the environment variable LOCKSTREAM_PLANTED_BUG, read once at start; a server with one logs
 * a warning when it starts. Never set it outside that suite.
 *
 * - `released-early`: `released` is answered before the holder's node is deleted (the delete
 *   follows RELEASED_EARLY_DELAY_MS later), so the lock is still held after its holder was told
 *   it is free.
 * - `follower-reads`: the ZooKeeper session's health counts replies to reads, which a follower
 *   cut off from its leader gives by itself, as proof that the leader heard the session, and its
 *   heartbeat is a read (the defect of SessionHealth before it counted only replies that passed
 *   through the leader).
 * - `elected-early`: a candidate is told `elected` as soon as it is granted, and its term is
 *   recorded in the election's history ELECTED_EARLY_DELAY_MS later (the record's check that
 *   the leader's node exists still holds, so a leader that resigned meanwhile is never
 *   recorded): a term told to its leader that observers never see.
 * - `observer-skips`: Observe with `from_term` starts after that term instead of at it (read as
 *   exclusive, an off-by-one): an observer that resumes from the last term it was told is never
 *   told that term when it is a recorded one.
 * - `unguarded-records`: a guarded record's write (PutRecord, DeleteRecord) skips the holder
 *   check: it neither looks the token's holder up nor checks the holder's node in its
 *   transaction, so a writer whose hold has ended (a holder paused past its loss) still writes.
 */
export const PLANTED_BUGS = [
  'released-early',
  'follower-reads',
  'elected-early',
  'observer-skips',
  'unguarded-records',
] as const;
export type PlantedBug = (typeof PLANTED_BUGS)[number];

export const RELEASED_EARLY_DELAY_MS = 300;
export const ELECTED_EARLY_DELAY_MS = 300;

function fromEnvironment(): PlantedBug | undefined {
  const value = process.env['LOCKSTREAM_PLANTED_BUG'];
  if (value === undefined || value === '') return undefined;
  if (!(PLANTED_BUGS as readonly string[]).includes(value)) {
    throw new Error(`LOCKSTREAM_PLANTED_BUG=${value}: expected one of ${PLANTED_BUGS.join(', ')}`);
  }
  return value as PlantedBug;
}

/** The bug planted in this process, if any. */
export const plantedBug: PlantedBug | undefined = fromEnvironment();
