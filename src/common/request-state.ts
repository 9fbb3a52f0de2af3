/**
 * Trailing metadata on a failed Acquire call: `ended` when the server holds nothing for the
 * request any more (a resume would find nothing), as opposed to a broken stream.
 */
export const REQUEST_STATE_KEY = 'lockstream-request';
