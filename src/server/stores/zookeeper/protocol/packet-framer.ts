/* Cuts a connection's byte stream into ZooKeeper's length-prefixed packets. */
import { JuteError, JuteReader } from './jute.js';

/**
 * Cuts a connection's byte stream into ZooKeeper's length-prefixed packets: every whole packet
 * of a read is handed over in one pass, and a partial one is kept for the next read.
 */
export class PacketFramer {
  /** Bytes read and not yet a whole packet. */
  #inbound: Buffer | undefined;

  /**
   * Calls `onPacket` with each whole packet `chunk` completes, in order. Throws (a JuteError,
   * or what `onPacket` throws) when the stream cannot be read on: drop the connection then.
   */
  read(chunk: Buffer, onPacket: (reader: JuteReader) => void): void {
    let buffer = this.#inbound ? Buffer.concat([this.#inbound, chunk]) : chunk;
    let offset = 0;
    while (buffer.length - offset >= 4) {
      const size = buffer.readInt32BE(offset);
      if (size < 0) throw new JuteError(`negative packet length ${size}`);
      if (buffer.length - offset - 4 < size) break;
      const reader = new JuteReader(buffer, offset + 4, offset + 4 + size);
      offset += 4 + size;
      onPacket(reader);
    }
    if (offset === buffer.length) this.#inbound = undefined;
    else {
      buffer = buffer.subarray(offset);
      // Keep only the partial packet, not the whole read it came in.
      this.#inbound = Buffer.from(buffer);
    }
  }
}
