/**
 * The bookkeeping of upstream's UsernsManager without its files: the kubelet's IDs cut
 * into slots of idsPerPod, which slot each pod holds, and upstream's checks (and
 * messages) for the kubelet's IDs and for a range read back from a pod's file.
 * A new pod gets a free slot found as upstream's allocation bitmap finds one: from a
 * random slot, the next free one onwards.
 */
import { UsernsError, type KubeletMappings } from './types.ts';

export class IdRanges {
  readonly idsPerPod: number;
  /** The first slot (the kubelet's first ID / idsPerPod) and how many there are. */
  readonly #off: number;
  readonly #len: number;
  readonly #used: Uint8Array;
  readonly #usedBy = new Map<string, number>();
  readonly #random: () => number;

  private constructor(off: number, len: number, idsPerPod: number, random: () => number) {
    this.#off = off;
    this.#len = len;
    this.idsPerPod = idsPerPod;
    this.#used = new Uint8Array(len);
    this.#random = random;
  }

  /** Checks the kubelet's IDs as upstream's MakeUserNsManager does. */
  static create(
    kubelet: KubeletMappings,
    idsPerPod: number,
    maxPods: number,
    random: () => number = Math.random,
  ): IdRanges {
    const { firstId, length } = kubelet;
    const unit = 65536;
    if (idsPerPod % unit !== 0)
      throw new UsernsError(
        `kubelet user namespace length ${idsPerPod} is not a multiple of ${unit}`,
      );
    if (firstId % idsPerPod !== 0)
      throw new UsernsError(
        `kubelet user assigned ID ${firstId} is not a multiple of ${idsPerPod}`,
      );
    // Range 0 holds the host's root: mapping it would circumvent the isolation.
    if (firstId < idsPerPod)
      throw new UsernsError(
        `kubelet user assigned ID ${firstId} must be greater or equal to ${idsPerPod}`,
      );
    if (length % idsPerPod !== 0)
      throw new UsernsError(
        `kubelet user assigned IDs length ${length} is not a multiple of ${idsPerPod}`,
      );
    if (length / idsPerPod < maxPods)
      throw new UsernsError(`kubelet user assigned IDs are not enough to support ${maxPods} pods`);
    return new IdRanges(firstId / idsPerPod, length / idsPerPod, idsPerPod, random);
  }

  /** The first host ID of the pod's range, if it holds one. */
  firstIdOf(uid: string): number | undefined {
    return this.#usedBy.get(uid);
  }

  uids(): string[] {
    return [...this.#usedBy.keys()];
  }

  /** Takes a free slot for the pod; returns its first host ID. */
  allocateOne(uid: string): number {
    const start = Math.floor(this.#random() * this.#len) % this.#len;
    for (let i = 0; i < this.#len; i++) {
      const at = (start + i) % this.#len;
      if (this.#used[at] === 0) {
        this.#used[at] = 1;
        const firstId = (at + this.#off) * this.idsPerPod;
        this.#usedBy.set(uid, firstId);
        return firstId;
      }
    }
    throw new UsernsError('could not find an empty slot to allocate a user namespace');
  }

  /** Marks a range read back from the pod's file as the pod's (upstream's record). */
  record(uid: string, from: number, length: number): void {
    if (length !== this.idsPerPod) throw new UsernsError(`wrong user namespace length ${length}`);
    if (from % this.idsPerPod !== 0)
      throw new UsernsError(`wrong user namespace offset specified ${from}`);
    const previous = this.#usedBy.get(uid);
    if (previous !== undefined && previous !== from)
      throw new UsernsError(`different user namespace range already used by pod "${uid}"`);
    const index = from / this.idsPerPod - this.#off;
    if (index < 0 || index >= this.#len) throw new UsernsError(`id ${from} is out of range`);
    if (previous === undefined && this.#used[index] === 1)
      throw new UsernsError(`range picked for pod "${uid}" already taken`);
    this.#used[index] = 1;
    this.#usedBy.set(uid, from);
  }

  /** Frees the pod's slot; returns whether it held one. */
  release(uid: string): boolean {
    const from = this.#usedBy.get(uid);
    if (from === undefined) return false;
    this.#usedBy.delete(uid);
    this.#used[from / this.idsPerPod - this.#off] = 0;
    return true;
  }
}
