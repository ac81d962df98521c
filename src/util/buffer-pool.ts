/**
 * Fixed-size buffers taken and given back, for streams that move many megabytes. A
 * buffer allocated per read is memory outside V8's heap that only a garbage collection
 * frees, and V8 answers a steady stream of it with full mark-compacts whose cost grows
 * with the whole heap: relaying 256 MiB through a TLS socket cost 9.2 ms of CPU per MiB
 * with 60 MB of live objects around, against 2.5 ms with pooled buffers (Node 24,
 * --optimize-for-size, this machine).
 *
 * A buffer goes back only once nothing refers to it any more (for a write: in its
 * callback). Pooled buffers keep bytes of earlier uses; callers hand on only the part a
 * read just filled.
 */
export class BufferPool {
  readonly size: number;
  readonly #maxFree: number;
  readonly #free: Buffer[] = [];

  /** `maxFree` bounds what an idle pool keeps (size * maxFree bytes). */
  constructor(size: number, maxFree: number) {
    this.size = size;
    this.#maxFree = maxFree;
  }

  take(): Buffer {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(this.size);
  }

  /** Returns `buffer` (one from take()); anything else, or beyond maxFree, is dropped. */
  give(buffer: Buffer): void {
    if (buffer.length !== this.size || buffer.byteOffset !== 0) return;
    if (this.#free.length < this.#maxFree && !this.#free.includes(buffer)) this.#free.push(buffer);
  }

  /** Buffers waiting to be taken again. */
  get free(): number {
    return this.#free.length;
  }
}
