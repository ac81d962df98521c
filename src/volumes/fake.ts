/**
 * A VolumeManager for other managers' unit tests: records every call and answers with
 * what the test configured (mounts per container, errors per operation).
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import type { MountedVolume, PodVolumes, VolumeError, VolumeManager } from './types.ts';

export type FakeVolumeCall =
  | { readonly op: 'setUpPod'; readonly uid: string }
  | { readonly op: 'containerMounts'; readonly uid: string; readonly container: string }
  | { readonly op: 'tearDownPod'; readonly uid: string }
  | { readonly op: 'cleanupOrphans'; readonly active: readonly string[] };

export class FakeVolumeManager implements VolumeManager {
  readonly calls: FakeVolumeCall[] = [];
  /** Volumes setUpPod returns, by pod UID (default: none). */
  readonly volumes = new Map<string, MountedVolume[]>();
  /** Mounts containerMounts returns, by `<uid>/<container>` (default: none). */
  readonly mounts = new Map<string, cri.Mount[]>();
  /** UIDs whose pod directories "exist" (for cleanupOrphans); setUpPod adds to it. */
  readonly podUIDs = new Set<string>();
  /** What volumesInUse reports. */
  inUse: string[] = [];
  /** Errors the next call of an operation throws (then cleared). */
  readonly errors = new Map<FakeVolumeCall['op'], VolumeError>();

  /** The error this call must fail with: the signal's reason or a configured one. */
  #failure(op: FakeVolumeCall['op'], signal: AbortSignal): Error | undefined {
    if (signal.aborted) {
      const reason: unknown = signal.reason;
      return reason instanceof Error ? reason : new DOMException('aborted', 'AbortError');
    }
    const err = this.errors.get(op);
    if (err !== undefined) this.errors.delete(op);
    return err;
  }

  volumesInUse(): string[] {
    return [...this.inUse];
  }

  setUpPod(pod: Pod, signal: AbortSignal): Promise<PodVolumes> {
    const uid = pod.metadata?.uid ?? '';
    this.calls.push({ op: 'setUpPod', uid });
    const err = this.#failure('setUpPod', signal);
    if (err !== undefined) return Promise.reject(err);
    this.podUIDs.add(uid);
    const byName = new Map((this.volumes.get(uid) ?? []).map((v) => [v.name, v]));
    return Promise.resolve({ byName });
  }

  containerMounts(
    pod: Pod,
    container: Container,
    _volumes: PodVolumes,
    _env: ReadonlyMap<string, string>,
    signal: AbortSignal,
  ): Promise<cri.Mount[]> {
    const uid = pod.metadata?.uid ?? '';
    this.calls.push({ op: 'containerMounts', uid, container: container.name });
    const err = this.#failure('containerMounts', signal);
    if (err !== undefined) return Promise.reject(err);
    return Promise.resolve([...(this.mounts.get(`${uid}/${container.name}`) ?? [])]);
  }

  tearDownPod(uid: string, signal: AbortSignal): Promise<void> {
    this.calls.push({ op: 'tearDownPod', uid });
    const err = this.#failure('tearDownPod', signal);
    if (err !== undefined) return Promise.reject(err);
    this.podUIDs.delete(uid);
    return Promise.resolve();
  }

  cleanupOrphans(active: ReadonlySet<string>, signal: AbortSignal): Promise<string[]> {
    this.calls.push({ op: 'cleanupOrphans', active: [...active].sort() });
    const err = this.#failure('cleanupOrphans', signal);
    if (err !== undefined) return Promise.reject(err);
    const removed = [...this.podUIDs].filter((u) => !active.has(u)).sort();
    for (const u of removed) this.podUIDs.delete(u);
    return Promise.resolve(removed);
  }
}
