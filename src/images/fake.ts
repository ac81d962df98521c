/**
 * An ImageEnsurer for other managers' tests: images are "present" or "pullable" by
 * reference, in memory; pull policy, events, back-off and results follow ImageManager
 * (the contract, contract.ts). Every call is recorded.
 */
import type { Container, Pod, Secret } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import type { EventRecorder, EventTarget } from '../events/types.ts';
import type { Clock } from '../util/clock.ts';
import { parseImageReference, pullPolicyOf } from './reference.ts';
import type { EnsureImageResult, ImageEnsurer } from './types.ts';

/** As ImageManager's default back-off: 10 s after the first failed pull. */
const FIRST_BACKOFF_MS = 10_000;

export interface FakeImageManagerOptions {
  readonly clock: Clock;
  readonly recorder: EventRecorder;
}

export class FakeImageManager implements ImageEnsurer {
  /** Normalized references on the node. */
  readonly present = new Set<string>();
  /** Normalized references a pull succeeds for (the pull makes them present). */
  readonly pullable = new Set<string>();
  /** `<pod uid>/<container>` of every call, in order. */
  readonly calls: string[] = [];
  readonly #o: FakeImageManagerOptions;
  /** Pod+image -> end of its back-off. */
  readonly #backoff = new Map<string, number>();

  constructor(options: FakeImageManagerOptions) {
    this.#o = options;
  }

  ensureImage(
    pod: Pod,
    container: Container,
    _pullSecrets: readonly Secret[],
    _sandboxConfig: cri.PodSandboxConfig | undefined,
    target: EventTarget,
    signal: AbortSignal,
  ): Promise<EnsureImageResult> {
    this.calls.push(`${pod.metadata?.uid ?? ''}/${container.name}`);
    if (signal.aborted) {
      const reason: unknown = signal.reason;
      return Promise.reject(reason instanceof Error ? reason : new Error('aborted'));
    }
    return Promise.resolve(this.#ensure(pod, container, target));
  }

  #ensure(pod: Pod, container: Container, target: EventTarget): EnsureImageResult {
    const { recorder, clock } = this.#o;
    const image = container.image ?? '';
    let ref;
    try {
      ref = parseImageReference(image);
    } catch (err) {
      const message = `Failed to apply default image tag "${image}": ${err instanceof Error ? err.message : String(err)}`;
      recorder.event(target, 'Warning', 'InspectFailed', message);
      return { ok: false, reason: 'InvalidImageName', message };
    }
    const normalized = ref.normalized;
    const policy = pullPolicyOf(container, ref);
    const imageRef = `sha256:fake-${normalized}`;
    if (policy !== 'Always' && this.present.has(normalized)) {
      recorder.event(
        target,
        'Normal',
        'Pulled',
        `Container image "${image}" already present on machine`,
      );
      return { ok: true, imageRef, image: normalized };
    }
    if (policy === 'Never') {
      const message = `Container image "${image}" is not present with pull policy of Never`;
      recorder.event(target, 'Warning', 'ErrImageNeverPull', message);
      return { ok: false, reason: 'ErrImageNeverPull', message };
    }
    const key = `${pod.metadata?.uid ?? ''}_${normalized}`;
    const until = this.#backoff.get(key) ?? 0;
    if (clock.now() < until) {
      const message = `Back-off pulling image "${image}"`;
      recorder.event(target, 'Normal', 'BackOff', message);
      return { ok: false, reason: 'ImagePullBackOff', message, retryAfterMs: until - clock.now() };
    }
    recorder.event(target, 'Normal', 'Pulling', `Pulling image "${image}"`);
    if (this.pullable.has(normalized)) {
      this.#backoff.delete(key);
      this.present.add(normalized);
      recorder.event(target, 'Normal', 'Pulled', `Successfully pulled image "${image}"`);
      return { ok: true, imageRef, image: normalized };
    }
    this.#backoff.set(key, clock.now() + FIRST_BACKOFF_MS);
    const message = `Failed to pull image "${image}": not found`;
    recorder.event(target, 'Warning', 'Failed', message);
    recorder.event(target, 'Warning', 'Failed', 'Error: ErrImagePull');
    return { ok: false, reason: 'ErrImagePull', message, retryAfterMs: 5000 };
  }
}
