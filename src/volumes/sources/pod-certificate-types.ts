/**
 * The podCertificate projection's API shapes (certificates.k8s.io/v1
 * PodCertificateRequest, the projected source), the PodCertificates port the projected
 * volume reads, and the per-projection state the manager in pod-certificates.ts keeps.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { ObjectMeta } from 'kubernetes-types/meta/v1.js';
import type { ResourcePath } from '../../kube/types.ts';
import { VolumeError } from '../types.ts';

export const PODCERTIFICATEREQUESTS: ResourcePath = {
  group: 'certificates.k8s.io',
  version: 'v1',
  resource: 'podcertificaterequests',
};

/** The projection as the v1.37 API has it (kubernetes-types predates it). */
export interface PodCertificateProjection {
  readonly signerName: string;
  readonly keyType: string;
  readonly maxExpirationSeconds?: number;
  readonly credentialBundlePath?: string;
  readonly keyPath?: string;
  readonly certificateChainPath?: string;
  readonly userAnnotations?: Readonly<Record<string, string>>;
}

/** The parts of a PodCertificateRequest berth writes and reads. */
export interface PodCertificateRequest {
  readonly metadata?: ObjectMeta;
  readonly spec?: { readonly podUID?: string; readonly [field: string]: unknown };
  readonly status?: {
    readonly conditions?: readonly { type: string; reason?: string; message?: string }[];
    readonly certificateChain?: string;
    readonly notBefore?: string;
    readonly notAfter?: string;
    readonly beginRefreshAt?: string;
  };
}

/** What a podCertificate projection reads. */
export interface PodCertificates {
  /** The key and chain (PEM) of a projection; throws VolumeError until issued. */
  credentialBundle(
    pod: Pod,
    volumeName: string,
    sourceIndex: number,
  ): { readonly key: Buffer; readonly chain: Buffer };
}

/** The gate is off (or no API): upstream's NoOpManager. */
export class DisabledPodCertificates implements PodCertificates {
  credentialBundle(): never {
    throw new VolumeError('BERTH_VOLUME_SOURCE_ERROR', 'unimplemented');
  }
}

export interface Issued {
  readonly key: Buffer;
  readonly chain: Buffer;
  readonly beginRefreshAt: number;
  readonly notAfter: number;
  overdueEmitted: boolean;
  expiredEmitted: boolean;
}

export type State =
  | { readonly kind: 'initial' }
  | {
      readonly kind: 'wait';
      readonly key: Buffer;
      readonly pcr: string;
      readonly abandonAt: number;
    }
  | { readonly kind: 'denied' | 'failed'; readonly reason: string; readonly message: string }
  | ({ readonly kind: 'fresh' } & Issued)
  | ({
      readonly kind: 'waitRefresh';
      readonly refreshKey: Buffer;
      readonly refreshPcr: string;
      readonly refreshAbandonAt: number;
    } & Issued);

export interface ProjectionKey {
  readonly namespace: string;
  readonly podName: string;
  readonly podUID: string;
  readonly volumeName: string;
  readonly sourceIndex: number;
}

export const keyText = (k: ProjectionKey): string =>
  `${k.podUID}/${k.volumeName}/${String(k.sourceIndex)}`;

export function requestKey(r: PodCertificateRequest): string {
  return `${r.metadata?.namespace ?? ''}/${r.metadata?.name ?? ''}`;
}

export function projectionKey(pod: Pod, volumeName: string, sourceIndex: number): ProjectionKey {
  return {
    namespace: pod.metadata?.namespace ?? 'default',
    podName: pod.metadata?.name ?? '',
    podUID: pod.metadata?.uid ?? '',
    volumeName,
    sourceIndex,
  };
}

/** The podCertificate of a projected source (a field kubernetes-types does not know). */
export function podCertificateOf(source: object | undefined): PodCertificateProjection | undefined {
  if (source === undefined || !('podCertificate' in source)) return undefined;
  const value = (source as { podCertificate?: PodCertificateProjection }).podCertificate;
  return value ?? undefined;
}
