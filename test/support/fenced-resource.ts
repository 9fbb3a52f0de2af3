/**
 * A resource that checks fencing tokens, as the README asks resources to: it remembers the
 * largest token it has accepted and refuses any write with a smaller one (Kleppmann's fenced
 * storage; Chubby's sequencer check done by the resource itself).
 */
export class FencedResource {
  readonly accepted: Array<{ readonly writer: string; readonly token: bigint }> = [];
  readonly refused: Array<{ readonly writer: string; readonly token: bigint }> = [];
  #largest = -1n;

  /** Applies the write if `token` is not older than the newest one seen; says whether it did. */
  write(writer: string, token: bigint): boolean {
    if (token < this.#largest) {
      this.refused.push({ writer, token });
      return false;
    }
    this.#largest = token;
    this.accepted.push({ writer, token });
    return true;
  }
}
