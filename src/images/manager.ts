/**
 * Makes sure a container's image is on the node before it is created, following the
 * pod's imagePullPolicy, with upstream's reasons (ErrImagePull, ImagePullBackOff,
 * ErrImageNeverPull, InvalidImageName), events (Pulling, Pulled, Failed, BackOff) and
 * per pod+image back-off (10 s doubling to 300 s). At most maxParallelImagePulls pulls
 * run at once (1 when serializeImagePulls).
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { CriError, type cri, type ImageService } from '../cri/index.ts';
import type { EventRecorder, EventTarget } from '../events/types.ts';
import { imageSizeBucket, type KubeletMetrics } from '../metrics/registry.ts';
import { TokenBucket } from '../kube/index.ts';
import type { Backoff } from '../util/backoff.ts';
import { BerthError } from '../util/errors.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import type { RegistryAuth } from './credentials.ts';
import { credentialsFor } from './credentials.ts';
import { InvalidImageReferenceError, parseImageReference, pullPolicyOf } from './reference.ts';
import type { EnsureImageResult, ImageEnsurer } from './types.ts';
import type { Secret } from 'kubernetes-types/core/v1.js';

export type { EnsureImageResult, ImageFailureReason } from './types.ts';

export interface ImageManagerOptions {
  readonly images: ImageService;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly backoff: Backoff;
  /** 1 = serialized pulls (upstream default). */
  readonly maxParallelPulls: number;
  /** Records kubelet_image_pull_duration_seconds{image_size_in_bytes} for successful pulls. */
  readonly metrics?: KubeletMetrics;
  /**
   * registryPullQPS and registryBurst: a token bucket every runtime pull attempt takes
   * from. A qps of zero (or none given) does not throttle, as upstream.
   */
  readonly pullRate?: { readonly qps: number; readonly burst: number };
}

/**
 * A pull refused by registryPullQPS before it reached the runtime. Upstream's
 * throttledImageService fails the pull with these words rather than waiting, so the pod
 * goes to ErrImagePull and its back-off, and the node never queues a pull storm.
 */
export class PullQpsExceededError extends BerthError {
  constructor() {
    super('IMAGE_PULL_QPS_EXCEEDED', 'pull QPS exceeded');
  }
}

/** A counting semaphore: at most `limit` holders at once, FIFO. */
class Semaphore {
  #free: number;
  readonly #waiters: (() => void)[] = [];
  constructor(limit: number) {
    this.#free = Math.max(1, limit);
  }
  async acquire(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await new Promise<void>((resolve) => this.#waiters.push(resolve));
  }
  release(): void {
    const next = this.#waiters.shift();
    if (next !== undefined) next();
    else this.#free++;
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;
}

export class ImageManager implements ImageEnsurer {
  readonly #o: ImageManagerOptions;
  readonly #pulls: Semaphore;

  readonly #pullRate: TokenBucket | undefined;

  constructor(options: ImageManagerOptions) {
    this.#o = options;
    this.#pulls = new Semaphore(options.maxParallelPulls);
    const rate = options.pullRate;
    this.#pullRate =
      rate !== undefined && rate.qps > 0
        ? new TokenBucket({ qps: rate.qps, burst: rate.burst, clock: options.clock })
        : undefined;
  }

  async ensureImage(
    pod: Pod,
    container: Container,
    pullSecrets: readonly Secret[],
    sandboxConfig: cri.PodSandboxConfig | undefined,
    target: EventTarget,
    signal: AbortSignal,
  ): Promise<EnsureImageResult> {
    const { recorder, images, backoff, clock } = this.#o;
    const image = container.image ?? '';
    let ref;
    try {
      ref = parseImageReference(image);
    } catch (err) {
      const message = `Failed to apply default image tag "${image}": ${err instanceof InvalidImageReferenceError ? err.message : String(err)}`;
      recorder.event(target, 'Warning', 'InspectFailed', message);
      return { ok: false, reason: 'InvalidImageName', message };
    }
    const normalized = ref.normalized;
    const policy = pullPolicyOf(container, ref);
    const present =
      policy === 'Always'
        ? undefined
        : await images.imageStatus({ image: { image: normalized } }, { signal });
    if (present?.image !== undefined && present.image.id !== '') {
      recorder.event(
        target,
        'Normal',
        'Pulled',
        `Container image "${image}" already present on machine`,
      );
      return { ok: true, imageRef: present.image.id, image: normalized };
    }
    if (policy === 'Never') {
      const message = `Container image "${image}" is not present with pull policy of Never`;
      recorder.event(target, 'Warning', 'ErrImageNeverPull', message);
      return { ok: false, reason: 'ErrImageNeverPull', message };
    }
    const key = `${pod.metadata?.uid ?? ''}_${normalized}`;
    if (backoff.inBackoff(key)) {
      const message = `Back-off pulling image "${image}"`;
      recorder.event(target, 'Normal', 'BackOff', message);
      return {
        ok: false,
        reason: 'ImagePullBackOff',
        message,
        retryAfterMs: backoff.remaining(key),
      };
    }
    recorder.event(target, 'Normal', 'Pulling', `Pulling image "${image}"`);
    const queued = clock.now();
    await this.#pulls.acquire();
    const started = clock.now();
    try {
      const auths = credentialsFor(pullSecrets, ref.domain);
      const imageRef = await this.#pullWithAuths(normalized, auths, sandboxConfig, signal);
      const done = clock.now();
      backoff.reset(key);
      const status = await images
        .imageStatus({ image: { image: imageRef } }, { signal })
        .catch(() => undefined);
      const size = status?.image?.size;
      // Upstream's duration includes the time queued behind other pulls.
      this.#o.metrics?.imagePullDuration.observe(
        { image_size_in_bytes: imageSizeBucket(Number(size ?? 0n)) },
        (done - queued) / 1000,
      );
      recorder.event(
        target,
        'Normal',
        'Pulled',
        `Successfully pulled image "${image}" in ${seconds(done - started)} (${seconds(done - queued)} including waiting)${size === undefined ? '' : `. Image size: ${String(size)} bytes.`}`,
      );
      return { ok: true, imageRef, image: normalized };
    } catch (err) {
      if (signal.aborted) throw err;
      backoff.next(key);
      // The runtime's own words, as upstream shows them (not berth's wrapper text).
      const detail =
        err instanceof CriError ? err.details : err instanceof Error ? err.message : String(err);
      const message = `Failed to pull image "${image}": ${detail}`;
      recorder.event(target, 'Warning', 'Failed', message);
      recorder.event(target, 'Warning', 'Failed', 'Error: ErrImagePull');
      this.#o.logger.info('Failed to pull image', { image, error: detail });
      return {
        ok: false,
        reason: 'ErrImagePull',
        message,
        retryAfterMs: Math.min(5000, backoff.remaining(key)),
      };
    } finally {
      this.#pulls.release();
    }
  }

  /** Tries each matching credential in turn, then anonymously if none matched. */
  async #pullWithAuths(
    image: string,
    auths: readonly RegistryAuth[],
    sandboxConfig: cri.PodSandboxConfig | undefined,
    signal: AbortSignal,
  ): Promise<string> {
    const attempts = auths.length === 0 ? [undefined] : auths;
    let last: unknown;
    for (const auth of attempts) {
      // Each runtime call takes a token, as upstream's throttle wraps PullImage itself.
      if (this.#pullRate !== undefined && !this.#pullRate.tryTake())
        throw new PullQpsExceededError();
      try {
        const res = await this.#o.images.pullImage(
          {
            image: { image },
            // No serverAddress: the image names the registry already, and containerd
            // rejects a bare host:port there ("first path segment in URL cannot contain colon").
            ...(auth !== undefined && {
              auth: { username: auth.username, password: auth.password },
            }),
            ...(sandboxConfig !== undefined && { sandboxConfig }),
          },
          { signal },
        );
        return res.imageRef;
      } catch (err) {
        last = err;
        if (signal.aborted) break;
      }
    }
    throw last instanceof Error ? last : new Error(String(last));
  }
}
