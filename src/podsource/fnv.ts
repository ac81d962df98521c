/** FNV-1a, 128-bit (Go's hash/fnv New128a), which upstream's kubelet uses for static pod UIDs. */

const OFFSET = 0x6c62272e07bb014262b821756295c58dn;
const PRIME = 0x0000000001000000000000000000013bn;
const MASK = (1n << 128n) - 1n;

export class Fnv128a {
  #h = OFFSET;

  write(data: string | Uint8Array): this {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let h = this.#h;
    for (const b of bytes) h = ((h ^ BigInt(b)) * PRIME) & MASK;
    this.#h = h;
    return this;
  }

  /** The 16-byte sum in hex, as hex.EncodeToString(h.Sum(nil)). */
  hex(): string {
    return this.#h.toString(16).padStart(32, '0');
  }
}
