/**
 * Creating one PodCertificateRequest for a podCertificate projection (upstream's
 * createPodCertificateRequest): a fresh key of the source's keyType, its proof of
 * possession, and a request naming the pod, its service account and this node.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { inNamespace, SERVICEACCOUNTS, type KubeClient } from '../../kube/types.ts';
import { VolumeError } from '../types.ts';
import { generateKeyAndProof } from './pod-certificate-keys.ts';
import {
  PODCERTIFICATEREQUESTS,
  type PodCertificateProjection,
  type PodCertificateRequest,
} from './pod-certificate-types.ts';

export interface RequestContext {
  readonly kube: KubeClient;
  readonly nodeName: string;
  /** The node object's UID; undefined while the node is not in the local cache. */
  readonly nodeUID: string | undefined;
}

export interface CreatedRequest {
  readonly keyPem: Buffer;
  readonly name: string;
  /** The request's creationTimestamp (ms), when the API server sent a valid one. */
  readonly createdAt: number | undefined;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Errors carry upstream's texts, which end up in the pod's FailedMount events. */
export async function createPodCertificateRequest(
  ctx: RequestContext,
  pod: Pod,
  source: PodCertificateProjection,
  why: 'initial' | 'refresh',
  signal: AbortSignal,
): Promise<CreatedRequest> {
  const namespace = pod.metadata?.namespace ?? 'default';
  // The apiserver defaults serviceAccountName to "default"; static pods may lack it.
  const saName = pod.spec?.serviceAccountName ?? pod.spec?.serviceAccount ?? 'default';
  let saUID: string;
  try {
    const sa = await ctx.kube.get<{ metadata?: { uid?: string } }>(
      inNamespace(SERVICEACCOUNTS, namespace),
      saName,
      { signal },
    );
    saUID = sa.metadata?.uid ?? '';
  } catch (err) {
    throw new VolumeError(
      'BERTH_VOLUME_SOURCE_ERROR',
      `while fetching service account: ${message(err)}`,
      { cause: err },
    );
  }
  if (ctx.nodeUID === undefined) {
    throw new VolumeError(
      'BERTH_VOLUME_SOURCE_ERROR',
      `while getting node object from local cache: node "${ctx.nodeName}" not found`,
    );
  }
  const { keyPem, stubPKCS10Request } = await generateKeyAndProof(source.keyType);
  const body: PodCertificateRequest = {
    metadata: {
      namespace,
      generateName: 'req-',
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Pod',
          name: pod.metadata?.name ?? '',
          uid: pod.metadata?.uid ?? '',
        },
      ],
    },
    spec: {
      signerName: source.signerName,
      podName: pod.metadata?.name ?? '',
      podUID: pod.metadata?.uid ?? '',
      serviceAccountName: saName,
      serviceAccountUID: saUID,
      nodeName: ctx.nodeName,
      nodeUID: ctx.nodeUID,
      ...(source.maxExpirationSeconds !== undefined && {
        maxExpirationSeconds: source.maxExpirationSeconds,
      }),
      stubPKCS10Request: stubPKCS10Request.toString('base64'),
      ...(source.userAnnotations !== undefined && {
        unverifiedUserAnnotations: source.userAnnotations,
      }),
    },
  };
  let created: PodCertificateRequest;
  try {
    created = await ctx.kube.create(inNamespace(PODCERTIFICATEREQUESTS, namespace), body, {
      signal,
    });
  } catch (err) {
    throw new VolumeError(
      'BERTH_VOLUME_SOURCE_ERROR',
      `while creating ${why} PodCertificateRequest: while creating on API: ${message(err)}`,
      { cause: err },
    );
  }
  const createdAt = Date.parse(created.metadata?.creationTimestamp ?? '');
  return {
    keyPem,
    name: created.metadata?.name ?? '',
    createdAt: Number.isNaN(createdAt) ? undefined : createdAt,
  };
}
