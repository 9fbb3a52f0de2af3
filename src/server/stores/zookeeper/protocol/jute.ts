/* Jute, ZooKeeper's record encoding: a writer and a reader. */
/**
 * Jute, ZooKeeper's record encoding: big-endian ints and longs, one-byte booleans, and strings,
 * buffers and vectors as an int length (-1 for null) followed by their contents. Longs are
 * bigints end to end, so zxids and session ids are exact.
 */

/** Writes records into one growing buffer (a whole batch of packets, framed by the caller). */
export class JuteWriter {
  #buffer: Buffer;
  #length = 0;

  constructor(initialSize = 1024) {
    this.#buffer = Buffer.allocUnsafe(initialSize);
  }

  get length(): number {
    return this.#length;
  }

  int(value: number): this {
    this.#reserve(4);
    this.#length = this.#buffer.writeInt32BE(value, this.#length);
    return this;
  }

  long(value: bigint): this {
    this.#reserve(8);
    this.#length = this.#buffer.writeBigInt64BE(value, this.#length);
    return this;
  }

  bool(value: boolean): this {
    this.#reserve(1);
    this.#length = this.#buffer.writeUInt8(value ? 1 : 0, this.#length);
    return this;
  }

  string(value: string | null): this {
    if (value === null) return this.int(-1);
    const size = Buffer.byteLength(value, 'utf8');
    this.int(size);
    this.#reserve(size);
    this.#length += this.#buffer.write(value, this.#length, 'utf8');
    return this;
  }

  buffer(value: Uint8Array | null): this {
    if (value === null) return this.int(-1);
    this.int(value.byteLength);
    this.#reserve(value.byteLength);
    this.#buffer.set(value, this.#length);
    this.#length += value.byteLength;
    return this;
  }

  vector<T>(items: readonly T[] | null, write: (item: T) => void): this {
    if (items === null) return this.int(-1);
    this.int(items.length);
    for (const item of items) write(item);
    return this;
  }

  /** Starts a length-prefixed packet; `endPacket` fills its length in. */
  startPacket(): number {
    const at = this.#length;
    this.int(0);
    return at;
  }

  endPacket(at: number): void {
    this.#buffer.writeInt32BE(this.#length - at - 4, at);
  }

  /** What has been written, as a view (valid until the next write). */
  bytes(): Buffer {
    return this.#buffer.subarray(0, this.#length);
  }

  reset(): void {
    this.#length = 0;
  }

  #reserve(size: number): void {
    if (this.#length + size <= this.#buffer.length) return;
    let capacity = this.#buffer.length * 2;
    while (capacity < this.#length + size) capacity *= 2;
    const grown = Buffer.allocUnsafe(capacity);
    this.#buffer.copy(grown, 0, 0, this.#length);
    this.#buffer = grown;
  }
}

/** A malformed record: the connection that sent it cannot be trusted any further. */
export class JuteError extends Error {
  override readonly name = 'JuteError';
}

/** Reads records from one packet. */
export class JuteReader {
  readonly #buffer: Buffer;
  #offset: number;
  readonly #end: number;

  constructor(buffer: Buffer, offset = 0, end = buffer.length) {
    this.#buffer = buffer;
    this.#offset = offset;
    this.#end = end;
  }

  get remaining(): number {
    return this.#end - this.#offset;
  }

  int(): number {
    this.#need(4);
    const value = this.#buffer.readInt32BE(this.#offset);
    this.#offset += 4;
    return value;
  }

  long(): bigint {
    this.#need(8);
    const value = this.#buffer.readBigInt64BE(this.#offset);
    this.#offset += 8;
    return value;
  }

  bool(): boolean {
    this.#need(1);
    return this.#buffer[this.#offset++] !== 0;
  }

  string(): string | null {
    const size = this.int();
    if (size < 0) return null;
    this.#need(size);
    const value = this.#buffer.toString('utf8', this.#offset, this.#offset + size);
    this.#offset += size;
    return value;
  }

  /** A copy: the packet's memory is reused once it has been read. */
  buffer(): Buffer | null {
    const size = this.int();
    if (size < 0) return null;
    this.#need(size);
    const value = Buffer.from(this.#buffer.subarray(this.#offset, this.#offset + size));
    this.#offset += size;
    return value;
  }

  vector<T>(read: () => T): T[] | null {
    const count = this.int();
    if (count < 0) return null;
    // Each item takes at least one byte: a larger count is garbage, not a reason to allocate.
    if (count > this.remaining) throw new JuteError(`vector of ${count} items in ${this.remaining} bytes`);
    const items: T[] = [];
    for (let i = 0; i < count; i += 1) items.push(read());
    return items;
  }

  #need(size: number): void {
    if (size < 0 || this.#offset + size > this.#end) {
      throw new JuteError(`record ends early: ${size} bytes wanted, ${this.#end - this.#offset} left`);
    }
  }
}
