/**
 * Test doubles for the content-volume sources: a FakeKubeClient that also answers
 * serviceaccounts/<name>/token (the shared fake does not model subresource creates),
 * a small DownwardResolver and an in-memory ObjectReader.
 */
import type { TokenRequest } from 'kubernetes-types/authentication/v1.js';
import type { ConfigMap, Pod, Secret } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient, type FakeKubeClientOptions } from '../../kube/fake-client.ts';
import type { ResourcePath, WriteOptions } from '../../kube/types.ts';
import type { Clock } from '../../util/clock.ts';
import type { DownwardResolver } from '../types.ts';
import type { KindObject, ObjectKind, ObjectReader } from './payload.ts';

/** One TokenRequest the fake answered: where it went and what it asked for. */
export interface RecordedTokenRequest {
  /** The collection and subresource the request went to. */
  readonly resource: string;
  readonly subresource: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly body: TokenRequest;
}

/** FakeKubeClient plus a TokenRequest endpoint issuing `token-<n>` tokens. */
export class TokenFakeClient extends FakeKubeClient {
  readonly tokenRequests: RecordedTokenRequest[] = [];
  /** The next token requests fail with this error, `times` times. */
  tokenFailure: { error: unknown; times: number } | undefined;
  /** The lifetime the "apiserver" grants (default: what was asked). */
  grantSeconds: number | undefined;
  readonly #clock: Clock;

  constructor(clock: Clock, options: FakeKubeClientOptions = {}) {
    super({ ...options, clock });
    this.#clock = clock;
  }

  override async create<T>(path: ResourcePath, body: T, options: WriteOptions = {}): Promise<T> {
    if (options.subresource !== 'token' || path.resource !== 'serviceaccounts') {
      return super.create(path, body, options);
    }
    await Promise.resolve();
    const request = body as TokenRequest;
    this.tokenRequests.push({
      resource: path.resource,
      subresource: options.subresource,
      namespace: path.namespace ?? '',
      serviceAccount: request.metadata?.name ?? '',
      body: structuredClone(request),
    });
    const failure = this.tokenFailure;
    if (failure !== undefined) {
      failure.times--;
      if (failure.times <= 0) this.tokenFailure = undefined;
      throw failure.error;
    }
    const seconds = this.grantSeconds ?? request.spec.expirationSeconds ?? 3600;
    const answer: TokenRequest = {
      ...request,
      spec: { ...request.spec, expirationSeconds: seconds },
      status: {
        token: `token-${this.tokenRequests.length}`,
        expirationTimestamp: new Date(this.#clock.now() + seconds * 1000).toISOString(),
      },
    };
    return answer as T;
  }
}

/** A DownwardResolver over a few pod fields and fixed resource values. */
export const fakeDownward: DownwardResolver = {
  podField(pod: Pod, fieldPath: string): string {
    switch (fieldPath) {
      case 'metadata.name':
        return pod.metadata?.name ?? '';
      case 'metadata.namespace':
        return pod.metadata?.namespace ?? '';
      case 'metadata.uid':
        return pod.metadata?.uid ?? '';
      case 'metadata.labels':
        return Object.entries(pod.metadata?.labels ?? {})
          .map(([k, v]) => `${k}="${v}"`)
          .sort()
          .join('\n');
      default:
        throw new Error(`unsupported fieldPath ${fieldPath}`);
    }
  },
  resourceField(_pod: Pod, containerName: string, resource: string, divisor?: string): string {
    return `${containerName}:${resource}:${divisor ?? '1'}`;
  },
};

/** An ObjectReader over fixed objects, keyed `<kind>/<namespace>/<name>`. */
export class MapObjectReader implements ObjectReader {
  readonly objects = new Map<string, ConfigMap | Secret>();
  readonly reads: string[] = [];
  failWith: Error | undefined;

  set(kind: ObjectKind, namespace: string, object: ConfigMap | Secret): this {
    this.objects.set(`${kind}/${namespace}/${object.metadata?.name ?? ''}`, object);
    return this;
  }

  get<K extends ObjectKind>(
    kind: K,
    namespace: string,
    name: string,
  ): Promise<KindObject<K> | undefined> {
    const key = `${kind}/${namespace}/${name}`;
    this.reads.push(key);
    if (this.failWith !== undefined) return Promise.reject(this.failWith);
    // Tests store a ConfigMap under configmap/… and a Secret under secret/….
    return Promise.resolve(this.objects.get(key) as KindObject<K> | undefined);
  }
}

/** A pod in namespace `ns` with the given volumes. */
export function podWith(spec: Partial<NonNullable<Pod['spec']>>, name = 'web'): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, labels: { app: 'web', tier: 'a' } },
    spec: { containers: [{ name: 'c', image: 'busybox' }], ...spec },
  };
}

/** Payload as plain `{ path: [utf8 content, octal mode] }` for deepEqual. */
export function plain(payload: ReadonlyMap<string, { data: Buffer; mode: number }>) {
  return Object.fromEntries(
    [...payload].map(([path, f]) => [path, [f.data.toString('utf8'), f.mode.toString(8)]]),
  );
}
