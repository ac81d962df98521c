/**
 * The fake client's object store: collections keyed by group and resource, the
 * resourceVersion counter, and the write rules of the apiserver that the fake
 * models (see fake-client.ts). Every change goes to the watch hub.
 */
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { Clock } from '../util/clock.ts';
import { WatchHub, type ChangeType, type FakeMeta, type FakeObject } from './fake-watch.ts';
import {
  matchesFields,
  matchesLabels,
  type FieldRequirement,
  type LabelRequirement,
} from './selectors.ts';
import { errorFromStatus, failureStatus } from './status.ts';
import type { DeleteOptions, KubeApiError, ResourcePath } from './types.ts';

type Meta = FakeMeta;
type Obj = FakeObject;

/** A caller's body as a stored object: a copy, with metadata always present. */
export function asObj(body: unknown): Obj {
  const o = structuredClone(body) as { metadata?: Meta; [key: string]: unknown };
  return { ...o, metadata: { ...(o.metadata ?? {}) } };
}

/** Resources whose status only the status subresource writes. */
const WITH_STATUS: ReadonlySet<string> = new Set([
  'pods',
  'nodes',
  'namespaces',
  'services',
  'persistentvolumes',
  'persistentvolumeclaims',
  'resourcequotas',
  'certificatesigningrequests',
  'deployments',
  'replicasets',
  'statefulsets',
  'daemonsets',
  'jobs',
]);

const KINDS: Readonly<Record<string, string>> = {
  pods: 'Pod',
  nodes: 'Node',
  namespaces: 'Namespace',
  configmaps: 'ConfigMap',
  secrets: 'Secret',
  events: 'Event',
  leases: 'Lease',
  serviceaccounts: 'ServiceAccount',
  services: 'Service',
};

const clone = <T>(value: T): T => structuredClone(value);
const timestamp = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const qualified = (p: ResourcePath): string =>
  p.group === '' ? p.resource : `${p.resource}.${p.group}`;

/** A KubeApiError built from a Status shaped as the apiserver's, as the fake throws it. */
export function apiError(
  code: number,
  reason: string,
  message: string,
  p?: ResourcePath,
  name?: string,
) {
  const details =
    p === undefined ? undefined : { ...(name === undefined ? {} : { name }), kind: p.resource };
  return errorFromStatus(failureStatus(code, reason, message, details), code);
}

/** The fake's objects and write rules; `FakeKubeClient` adds calls, failures and paging on top. */
export class FakeStore {
  readonly #clock: Clock;
  readonly #requireNamespaces: boolean;
  readonly #objects = new Map<string, Map<string, Obj>>();
  /** The latest resourceVersion. */
  rv = 1000;
  readonly hub: WatchHub;

  constructor(clock: Clock, requireNamespaces: boolean, historyLimit: number) {
    this.#clock = clock;
    this.#requireNamespaces = requireNamespaces;
    this.hub = new WatchHub(clock, historyLimit, this.rv);
  }

  /** A delete: preconditions, graceful pods, finalizers, a namespace's contents. */
  delete(path: ResourcePath, name: string, options: DeleteOptions): void {
    const stored = this.existing(path, name);
    const pre = options.preconditions;
    if (pre?.uid !== undefined && pre.uid !== stored.metadata.uid) {
      throw apiError(
        409,
        'Conflict',
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${stored.metadata.uid ?? ''}`,
        path,
        name,
      );
    }
    if (
      pre?.resourceVersion !== undefined &&
      pre.resourceVersion !== stored.metadata.resourceVersion
    ) {
      throw apiError(
        409,
        'Conflict',
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${stored.metadata.resourceVersion ?? ''}`,
        path,
        name,
      );
    }
    const grace = this.gracePeriod(path, stored, options.gracePeriodSeconds);
    const finalizers = stored.metadata.finalizers ?? [];
    if (grace > 0 || finalizers.length > 0) {
      const current = stored.metadata.deletionGracePeriodSeconds;
      if (
        stored.metadata.deletionTimestamp !== undefined &&
        (current === undefined || current <= grace)
      )
        return;
      const next = clone(stored);
      next.metadata.deletionTimestamp = timestamp(this.#clock.now() + grace * 1000);
      next.metadata.deletionGracePeriodSeconds = grace;
      this.commit(path, stored, next);
      return;
    }
    this.remove(path, stored);
    if (path.resource === 'namespaces' && path.group === '') {
      for (const [collection, objects] of this.#objects) {
        for (const obj of [...objects.values()]) {
          if (obj.metadata.namespace !== name) continue;
          const [group = '', resource = ''] = collection.split('/');
          this.remove({ group, version: 'v1', resource, namespace: name }, obj);
        }
      }
    }
  }

  collectionKey(path: ResourcePath): string {
    return `${path.group}/${path.resource}`;
  }

  collection(path: ResourcePath): Map<string, Obj> {
    const key = this.collectionKey(path);
    let objects = this.#objects.get(key);
    if (objects === undefined) {
      objects = new Map();
      this.#objects.set(key, objects);
    }
    return objects;
  }

  key(path: ResourcePath, name: string): string {
    return `${path.namespace ?? ''}/${name}`;
  }

  notFound(path: ResourcePath, name: string): KubeApiError {
    return apiError(404, 'NotFound', `${qualified(path)} "${name}" not found`, path, name);
  }

  existing(path: ResourcePath, name: string): Obj {
    const stored = this.collection(path).get(this.key(path, name));
    if (stored === undefined) throw this.notFound(path, name);
    return stored;
  }

  select(
    path: ResourcePath,
    labels: readonly LabelRequirement[],
    fields: readonly FieldRequirement[],
  ): Obj[] {
    const ns = path.namespace ?? '';
    return [...this.collection(path).entries()]
      .filter(([key]) => ns === '' || key.startsWith(`${ns}/`))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, obj]) => obj)
      .filter((obj) => matchesLabels(obj.metadata.labels, labels) && matchesFields(obj, fields));
  }

  preconditions(path: ResourcePath, stored: Obj, meta: Meta): void {
    const name = stored.metadata.name ?? '';
    if (
      meta.resourceVersion !== undefined &&
      meta.resourceVersion !== '' &&
      meta.resourceVersion !== stored.metadata.resourceVersion
    ) {
      throw apiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualified(path)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        path,
        name,
      );
    }
    if (meta.uid !== undefined && meta.uid !== '' && meta.uid !== stored.metadata.uid) {
      throw apiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualified(path)} "${name}": Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${stored.metadata.uid ?? ''}`,
        path,
        name,
      );
    }
  }

  gracePeriod(path: ResourcePath, stored: Obj, requested: number | undefined): number {
    if (path.resource !== 'pods' || path.group !== '') return 0;
    const spec = (stored['spec'] ?? {}) as {
      nodeName?: string;
      terminationGracePeriodSeconds?: number;
    };
    const phase = (stored['status'] as { phase?: string } | undefined)?.phase;
    // As the apiserver: a pod no kubelet runs (unbound or finished) goes at once.
    if ((spec.nodeName ?? '') === '' || phase === 'Succeeded' || phase === 'Failed') return 0;
    return Math.max(0, requested ?? spec.terminationGracePeriodSeconds ?? 30);
  }

  insert(path: ResourcePath, obj: Obj): Obj {
    const meta: Meta = { ...obj.metadata };
    const ns = path.namespace ?? '';
    if (
      meta.namespace !== undefined &&
      meta.namespace !== '' &&
      ns !== '' &&
      meta.namespace !== ns
    ) {
      throw apiError(
        400,
        'BadRequest',
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    if (ns !== '' && this.#requireNamespaces) {
      const namespace = this.#objects.get('/namespaces')?.get(`/${ns}`);
      if (namespace === undefined) throw apiError(404, 'NotFound', `namespaces "${ns}" not found`);
      if (namespace.metadata.deletionTimestamp !== undefined) {
        throw apiError(
          403,
          'Forbidden',
          `unable to create new content in namespace ${ns} because it is being terminated`,
        );
      }
    }
    let name = meta.name ?? '';
    if (name === '' && meta.generateName !== undefined && meta.generateName !== '') {
      name = meta.generateName + randomUUID().replaceAll('-', '').slice(0, 5);
    }
    if (name === '') {
      throw apiError(
        422,
        'Invalid',
        'metadata.name: Required value: name or generateName is required',
        path,
      );
    }
    const objects = this.collection(path);
    if (objects.has(this.key(path, name))) {
      throw apiError(
        409,
        'AlreadyExists',
        `${qualified(path)} "${name}" already exists`,
        path,
        name,
      );
    }
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    const created: Obj = {
      ...(KINDS[path.resource] === undefined || path.group !== ''
        ? {}
        : { kind: KINDS[path.resource], apiVersion: 'v1' }),
      ...obj,
      metadata: {
        ...meta,
        name,
        ...(ns === '' ? {} : { namespace: ns }),
        uid: randomUUID(),
        resourceVersion: String(++this.rv),
        creationTimestamp: timestamp(this.#clock.now()),
      },
    };
    if (path.resource === 'namespaces' && path.group === '')
      created['status'] ??= { phase: 'Active' };
    objects.set(this.key(path, name), created);
    this.record('ADDED', path, created, undefined);
    return clone(created);
  }

  /** A write of `candidate` over `stored` through the main resource or a subresource. */
  replace(path: ResourcePath, stored: Obj, candidate: Obj, subresource: string | undefined): Obj {
    let next: Obj;
    if (subresource === 'status') {
      next = clone(stored);
      if (candidate['status'] === undefined) delete next['status'];
      else next['status'] = clone(candidate['status']);
    } else if (subresource === undefined) {
      next = clone(candidate);
      if (WITH_STATUS.has(path.resource)) {
        if (stored['status'] === undefined) delete next['status'];
        else next['status'] = clone(stored['status']);
      }
      const keep = stored.metadata;
      next.metadata = {
        ...candidate.metadata,
        name: keep.name ?? '',
        uid: keep.uid ?? '',
        creationTimestamp: keep.creationTimestamp ?? '',
        ...(keep.namespace === undefined ? {} : { namespace: keep.namespace }),
        ...(keep.deletionTimestamp === undefined
          ? {}
          : { deletionTimestamp: keep.deletionTimestamp }),
        ...(keep.deletionGracePeriodSeconds === undefined
          ? {}
          : { deletionGracePeriodSeconds: keep.deletionGracePeriodSeconds }),
      };
      next['kind'] ??= stored['kind'];
      next['apiVersion'] ??= stored['apiVersion'];
    } else {
      throw apiError(404, 'NotFound', 'the server could not find the requested resource');
    }
    next.metadata.resourceVersion = stored.metadata.resourceVersion ?? '';
    // The apiserver does not write (nor bump the resourceVersion for) a no-op update.
    if (isDeepStrictEqual(next, stored)) return clone(stored);
    const finalizers = next.metadata.finalizers ?? [];
    if (
      next.metadata.deletionTimestamp !== undefined &&
      finalizers.length === 0 &&
      (next.metadata.deletionGracePeriodSeconds ?? 0) === 0
    ) {
      this.remove(path, next);
      return clone(next);
    }
    return this.commit(path, stored, next);
  }

  commit(path: ResourcePath, stored: Obj, next: Obj): Obj {
    next.metadata.resourceVersion = String(++this.rv);
    this.collection(path).set(this.key(path, next.metadata.name ?? ''), next);
    this.record('MODIFIED', path, next, stored);
    return clone(next);
  }

  remove(path: ResourcePath, stored: Obj): void {
    const key = `${stored.metadata.namespace ?? ''}/${stored.metadata.name ?? ''}`;
    this.collection(path).delete(key);
    const gone = clone(stored);
    gone.metadata.resourceVersion = String(++this.rv);
    this.record('DELETED', path, gone, stored);
  }

  record(type: ChangeType, path: ResourcePath, object: Obj, previous: Obj | undefined): void {
    this.hub.record({
      rv: this.rv,
      collection: this.collectionKey(path),
      namespace: object.metadata.namespace ?? '',
      type,
      object: clone(object),
      previous: previous === undefined ? undefined : clone(previous),
    });
  }
}
