/**
 * How much longer than on a developer's machine the tests wait: LOCKSTREAM_TEST_TIME_SCALE
 * (default 1; 3 on a slow or busy machine makes every test timeout, and every deadline a test
 * waits for an event by, three times as long). As Curator's Timing, it stretches only patience:
 * what a test measures (a wait_timeout whose expiry it asserts, a bound on how late a grant may
 * come) stays as it is, unless a longer one keeps the test's meaning.
 */
function timeScale(): number {
  const text = process.env['LOCKSTREAM_TEST_TIME_SCALE'];
  if (text === undefined || text === '') return 1;
  const factor = Number(text);
  if (!Number.isFinite(factor) || factor < 1) {
    throw new Error(`LOCKSTREAM_TEST_TIME_SCALE must be a number of at least 1, not ${JSON.stringify(text)}`);
  }
  return factor;
}

/** The factor every test timeout and event deadline is multiplied by. */
export const TIME_SCALE = timeScale();

/** `ms` stretched by LOCKSTREAM_TEST_TIME_SCALE (whole milliseconds). */
export function scaled(ms: number): number {
  return Math.ceil(ms * TIME_SCALE);
}
