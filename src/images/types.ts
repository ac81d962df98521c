/**
 * What the pod sync and image volumes use of the image manager (upstream's
 * images.ImageManager: EnsureImageExists). ImageManager (manager.ts) pulls through the
 * CRI; FakeImageManager (fake.ts) keeps images in memory; both pass contract.ts.
 */
import type { Container, Pod, Secret } from 'kubernetes-types/core/v1.js';
import type { cri } from '../cri/index.ts';
import type { EventTarget } from '../events/types.ts';

export type ImageFailureReason =
  'ErrImagePull' | 'ImagePullBackOff' | 'ErrImageNeverPull' | 'InvalidImageName';

export type EnsureImageResult =
  | { readonly ok: true; readonly imageRef: string; readonly image: string }
  | {
      readonly ok: false;
      readonly reason: ImageFailureReason;
      readonly message: string;
      /** When to sync again: soon after ErrImagePull (to show ImagePullBackOff), else when the back-off ends. */
      readonly retryAfterMs?: number;
    };

export interface ImageEnsurer {
  /**
   * Makes sure the container's image is on the node as its imagePullPolicy says,
   * recording upstream's events on `target`; failures are results, not rejections
   * (only an aborted signal rejects).
   */
  ensureImage(
    pod: Pod,
    container: Container,
    pullSecrets: readonly Secret[],
    sandboxConfig: cri.PodSandboxConfig | undefined,
    target: EventTarget,
    signal: AbortSignal,
  ): Promise<EnsureImageResult>;
}
