/**
 * The Kubernetes API as berth's managers see it: a thin, typed REST client (no
 * informer framework). Implementations: `HttpKubeClient` (node:https, one long-lived
 * keep-alive Agent per credential set) and `FakeKubeClient` for unit tests; both pass
 * the contract suite in kube/contract.ts.
 */
import { BerthError } from '../util/errors.ts';

export interface RequestOptions {
  readonly signal?: AbortSignal;
}

/** Identifies a resource collection, e.g. core/v1 pods in a namespace. */
export interface ResourcePath {
  /** '' for the core group. */
  readonly group: string;
  readonly version: string;
  /** Plural resource name: pods, nodes, events, leases, … */
  readonly resource: string;
  /** Omitted for cluster-scoped resources and all-namespace lists/watches. */
  readonly namespace?: string;
}

export interface ListOptions extends RequestOptions {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly resourceVersion?: string;
  readonly limit?: number;
  readonly continue?: string;
}

export interface WatchOptions extends RequestOptions {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly resourceVersion?: string;
  readonly timeoutSeconds?: number;
  readonly allowWatchBookmarks?: boolean;
}

export interface WriteOptions extends RequestOptions {
  /** e.g. "status" for the status subresource. */
  readonly subresource?: string;
  readonly fieldManager?: string;
}

export type PatchType = 'strategic' | 'merge' | 'json' | 'apply';

export interface PatchOptions extends WriteOptions {
  /** Server-side apply: take ownership of conflicting fields. */
  readonly force?: boolean;
}

export interface DeleteOptions extends RequestOptions {
  readonly gracePeriodSeconds?: number;
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string };
}

export interface ListResult<T> {
  readonly items: T[];
  readonly metadata: { readonly resourceVersion: string; readonly continue?: string };
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent<T> {
  readonly type: WatchEventType;
  /** For ERROR events, a metav1.Status (see `statusFromWatchError`). */
  readonly object: T;
}

export interface KubeClient {
  get<T>(path: ResourcePath, name: string, options?: RequestOptions): Promise<T>;
  list<T>(path: ResourcePath, options?: ListOptions): Promise<ListResult<T>>;
  create<T>(path: ResourcePath, body: T, options?: WriteOptions): Promise<T>;
  update<T>(path: ResourcePath, name: string, body: T, options?: WriteOptions): Promise<T>;
  patch<T>(
    path: ResourcePath,
    name: string,
    patch: unknown,
    type: PatchType,
    options?: PatchOptions,
  ): Promise<T>;
  delete(path: ResourcePath, name: string, options?: DeleteOptions): Promise<void>;
  /**
   * One watch request. Ends when the server closes it (timeoutSeconds) or `signal`
   * aborts (quietly); throws KubeApiError on HTTP errors (410 Gone: reason "Expired" or
   * "Gone") and on ERROR events.
   */
  watch<T>(path: ResourcePath, options?: WatchOptions): AsyncIterable<WatchEvent<T>>;
  /** Closes connections. Idempotent. */
  close(): Promise<void>;
}

export type KubeErrorReason =
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Gone'
  | 'Expired'
  | 'Invalid'
  | 'Forbidden'
  | 'Unauthorized'
  | 'TooManyRequests'
  | 'BadRequest'
  | 'InternalError'
  | 'Timeout'
  | 'Unknown';

/** An API answer other than 2xx, or a transport failure (status 0). */
export class KubeApiError extends BerthError {
  readonly status: number;
  readonly reason: KubeErrorReason;
  constructor(
    status: number,
    reason: KubeErrorReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`BERTH_KUBE_${reason.toUpperCase()}`, message, options);
    this.status = status;
    this.reason = reason;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.reason === 'NotFound';
}
export function isForbidden(err: unknown): boolean {
  return err instanceof KubeApiError && err.reason === 'Forbidden';
}
export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.reason === 'Conflict';
}
export function isAlreadyExists(err: unknown): boolean {
  return err instanceof KubeApiError && err.reason === 'AlreadyExists';
}
export function isGone(err: unknown): boolean {
  return (
    err instanceof KubeApiError &&
    (err.reason === 'Gone' || err.reason === 'Expired' || err.status === 410)
  );
}

export const PODS: ResourcePath = { group: '', version: 'v1', resource: 'pods' };
export const NODES: ResourcePath = { group: '', version: 'v1', resource: 'nodes' };
export const EVENTS: ResourcePath = { group: '', version: 'v1', resource: 'events' };
export const SECRETS: ResourcePath = { group: '', version: 'v1', resource: 'secrets' };
export const CONFIGMAPS: ResourcePath = { group: '', version: 'v1', resource: 'configmaps' };
export const NAMESPACES: ResourcePath = { group: '', version: 'v1', resource: 'namespaces' };
export const SERVICEACCOUNTS: ResourcePath = {
  group: '',
  version: 'v1',
  resource: 'serviceaccounts',
};
export const LEASES: ResourcePath = {
  group: 'coordination.k8s.io',
  version: 'v1',
  resource: 'leases',
};

export const PERSISTENTVOLUMECLAIMS: ResourcePath = {
  group: '',
  version: 'v1',
  resource: 'persistentvolumeclaims',
};
export const PERSISTENTVOLUMES: ResourcePath = {
  group: '',
  version: 'v1',
  resource: 'persistentvolumes',
};
export const VOLUMEATTACHMENTS: ResourcePath = {
  group: 'storage.k8s.io',
  version: 'v1',
  resource: 'volumeattachments',
};
export const CSIDRIVERS: ResourcePath = {
  group: 'storage.k8s.io',
  version: 'v1',
  resource: 'csidrivers',
};
export const CSINODES: ResourcePath = {
  group: 'storage.k8s.io',
  version: 'v1',
  resource: 'csinodes',
};

export function inNamespace(path: ResourcePath, namespace: string): ResourcePath {
  return { ...path, namespace };
}
