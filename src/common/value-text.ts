/*
 * A lock's published value as text for people to read: the text itself when it is printable UTF-8,
 * otherwise its base64.
 */
const CONTROL_CHARACTER = /\p{Cc}/u;

/**
 * A published value for people to read: its text when it is printable UTF-8 (an address, a
 * host name), otherwise `base64:` and its base64; empty when there is none.
 */
export function valueText(value: Uint8Array): string {
  if (value.byteLength === 0) return '';
  const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const text = bytes.toString('utf8');
  const printable = Buffer.from(text, 'utf8').equals(bytes) && !CONTROL_CHARACTER.test(text);
  return printable ? text : `base64:${bytes.toString('base64')}`;
}
