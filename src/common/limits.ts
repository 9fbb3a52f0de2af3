/** Limits the server enforces on an Acquire request; the SDK checks them too, to fail early. */
export const LOCK_NAME_MAX_BYTES = 512;
export const OWNER_MAX_BYTES = 256;
/** Largest wait_timeout: what a Node.js timer can represent (2^31 - 1 ms, about 24.8 days). */
export const WAIT_TIMEOUT_MAX_MS = 2 ** 31 - 1;

/**
 * Trailing metadata on a failed Acquire call: `ended` when the server holds nothing for the
 * request any more (a resume would find nothing), as opposed to a broken stream.
 */
export const REQUEST_STATE_KEY = 'lockstream-request';

/** Largest value a request may publish (AcquireStart.value, set_value). */
export const VALUE_MAX_BYTES = 1024;

/** The most locks one multi-lock may name (AcquireStart.locks). */
export const MULTI_LOCK_MAX = 16;

/** The largest limit a semaphore may have (AcquireStart.limit). */
export const SEMAPHORE_LIMIT_MAX = 1_000_000;

/** Heartbeat intervals a client may ask for. */
export const HEARTBEAT_INTERVAL_MIN_MS = 100;
export const HEARTBEAT_INTERVAL_MAX_MS = 600_000;
