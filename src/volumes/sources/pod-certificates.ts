/**
 * podCertificate projected sources (upstream pkg/kubelet/podcertificate, gate
 * PodCertificateRequest, GA and on in v1.37): for each projection berth generates a key
 * of the source's keyType, creates a PodCertificateRequest (certificates.k8s.io/v1)
 * naming the pod, its service account and the node, waits for a signer to issue it, and
 * serves the key and chain to the projected volume. From beginRefreshAt (plus up to
 * 5 min of jitter) it requests a new certificate, serving the old one meanwhile.
 *
 * Each projection (pod UID, volume, source index) is a small state machine, as upstream's:
 *
 *   initial -> wait -> fresh -> waitRefresh -> fresh ...
 *                  \-> denied | failed (final; the pod gets a Warning event)
 *
 * A request that vanishes is abandoned 10 min (plus jitter) after its creation and
 * requested again. Requests are read from a reflector of this node's requests
 * (fieldSelector spec.nodeName, the only list the node authorizer allows); a change to
 * one re-runs its pod's projections and, when the credentials change, `onChange` lets
 * the kubelet resync the pod so the files follow at once. Every minute all projections
 * run again (refresh times, overdue and expiry events).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { Reflector } from '../../kube/reflector.ts';
import type { KubeClient } from '../../kube/types.ts';
import type { EventRecorder } from '../../events/types.ts';
import type { Clock } from '../../util/clock.ts';
import { isAborted } from '../../util/errors.ts';
import type { Logger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';
import { createPodCertificateRequest } from './pod-certificate-request.ts';
import { pemBlocks, pemCertificate } from './trust-bundles.ts';
import {
  keyText,
  PODCERTIFICATEREQUESTS,
  podCertificateOf,
  projectionKey,
  requestKey,
  type Issued,
  type PodCertificateProjection,
  type PodCertificateRequest,
  type PodCertificates,
  type ProjectionKey,
  type State,
} from './pod-certificate-types.ts';

export {
  DisabledPodCertificates,
  PODCERTIFICATEREQUESTS,
  podCertificateOf,
  type PodCertificateProjection,
  type PodCertificateRequest,
  type PodCertificates,
} from './pod-certificate-types.ts';

const ASSUME_DELETED_MS = 10 * 60_000;
const REFRESH_OVERDUE_MS = 10 * 60_000;
const JITTER_MS = 5 * 60_000;

export interface PodCertificateManagerOptions {
  readonly kube: KubeClient;
  readonly nodeName: string;
  /** The Node's uid once registered (upstream reads it from its node informer). */
  readonly nodeUID: () => string | undefined;
  /** The pods of this node (upstream's pod manager). */
  readonly pods: () => Iterable<Pod>;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Jitter source (default Math.random). */
  readonly random?: () => number;
  /** How often every projection runs again (default 1 min). */
  readonly refreshPassMs?: number;
}

/** Upstream's IssuingManager (see the top of this file). */
export class PodCertificateManager implements PodCertificates {
  readonly #o: PodCertificateManagerOptions;
  readonly #log: Logger;
  readonly #records = new Map<string, { key: ProjectionKey; state: State }>();
  readonly #requests = new Map<string, PodCertificateRequest>();
  readonly #queue = new Map<string, ProjectionKey>();
  readonly #listeners: ((podUID: string) => void)[] = [];
  #wake: (() => void) | undefined;
  #synced = false;

  constructor(options: PodCertificateManagerOptions) {
    this.#o = options;
    this.#log = options.logger.child({ component: 'pod-certificates' });
  }

  /** Called with a pod's uid when one of its projections got new credentials or failed. */
  onChange(listener: (podUID: string) => void): void {
    this.#listeners.push(listener);
  }

  credentialBundle(
    pod: Pod,
    volumeName: string,
    sourceIndex: number,
  ): { readonly key: Buffer; readonly chain: Buffer } {
    const key = projectionKey(pod, volumeName, sourceIndex);
    const record = this.#records.get(keyText(key));
    if (record === undefined) {
      // Upstream's TrackPod runs when the pod is added; here the first mount starts it.
      this.#enqueue(key);
      throw new VolumeError(
        'BERTH_VOLUME_SOURCE_ERROR',
        `no credentials yet for key=${JSON.stringify(key)}`,
      );
    }
    const s = record.state;
    switch (s.kind) {
      case 'initial':
      case 'wait':
        throw new VolumeError('BERTH_VOLUME_SOURCE_ERROR', 'credential bundle is not issued yet');
      case 'denied':
      case 'failed':
        throw new VolumeError(
          'BERTH_VOLUME_SOURCE_ERROR',
          `PodCertificateRequest was permanently ${s.kind}: reason=${JSON.stringify(s.reason)} message=${JSON.stringify(s.message)}`,
        );
      case 'fresh':
      case 'waitRefresh':
        return { key: s.key, chain: s.chain };
    }
  }

  /** Forgets a pod's credentials (upstream's ForgetPod). */
  forgetPod(podUID: string): void {
    for (const [k, r] of this.#records) if (r.key.podUID === podUID) this.#records.delete(k);
  }

  /** Reflects this node's requests and runs the projections until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const reflector = new Reflector<PodCertificateRequest>({
      client: this.#o.kube,
      path: PODCERTIFICATEREQUESTS,
      fieldSelector: `spec.nodeName=${this.#o.nodeName}`,
      clock: this.#o.clock,
      logger: this.#log,
      name: 'podcertificaterequests',
      handler: {
        onSync: (items) => {
          this.#requests.clear();
          for (const r of items) this.#requests.set(requestKey(r), r);
          this.#synced = true;
          for (const r of items) this.#queuePod(r.spec?.podUID ?? '');
        },
        onEvent: (type, r) => {
          if (type === 'DELETED') this.#requests.delete(requestKey(r));
          else this.#requests.set(requestKey(r), r);
          this.#queuePod(r.spec?.podUID ?? '');
        },
      },
    });
    const reflecting = reflector.run(signal);
    const refreshing = this.#refreshLoop(signal);
    try {
      await this.#processLoop(signal);
    } finally {
      await Promise.allSettled([reflecting, refreshing]);
    }
  }

  async #refreshLoop(signal: AbortSignal): Promise<void> {
    const period = this.#o.refreshPassMs ?? 60_000;
    while (!signal.aborted) {
      // Jittered by up to the period, as wait.JitterUntil with factor 1.0.
      const delay = period * (1 + this.#random());
      await this.#o.clock.sleep(delay, signal).catch(() => undefined);
      if (isAborted(signal)) return;
      const live = new Set<string>();
      for (const pod of this.#o.pods()) {
        live.add(pod.metadata?.uid ?? '');
        this.#queuePod(pod.metadata?.uid ?? '');
      }
      for (const [k, r] of this.#records) if (!live.has(r.key.podUID)) this.#records.delete(k);
    }
  }

  async #processLoop(signal: AbortSignal): Promise<void> {
    const failures = new Map<string, number>();
    while (!signal.aborted) {
      if (this.#queue.size === 0 || !this.#synced) {
        await this.#sleepUntilWoken(1000, signal);
        continue;
      }
      const batch = [...this.#queue.values()];
      this.#queue.clear();
      let retry = false;
      for (const key of batch) {
        if (isAborted(signal)) return;
        try {
          await this.#handle(key, signal);
          failures.delete(keyText(key));
        } catch (err) {
          if (isAborted(signal)) return;
          const n = (failures.get(keyText(key)) ?? 0) + 1;
          failures.set(keyText(key), n);
          this.#log.error('while handling podCertificate projected volume source', {
            pod: `${key.namespace}/${key.podName}`,
            podUID: key.podUID,
            volume: key.volumeName,
            sourceIndex: key.sourceIndex,
            error: err instanceof Error ? err.message : String(err),
          });
          this.#queue.set(keyText(key), key);
          retry = true;
        }
      }
      // Failed keys come back after a back-off (5 ms doubling, capped at 1000 s upstream;
      // here capped at 30 s so a cluster hiccup does not park a pod for long).
      if (retry) {
        const worst = Math.max(...failures.values());
        await this.#o.clock.sleep(Math.min(30_000, 5 * 2 ** worst), signal).catch(() => undefined);
      }
    }
  }

  async #sleepUntilWoken(ms: number, signal: AbortSignal): Promise<void> {
    const timer = new AbortController();
    const onAbort = (): void => {
      timer.abort();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    this.#wake = () => {
      timer.abort();
    };
    try {
      await this.#o.clock.sleep(ms, timer.signal).catch(() => undefined);
    } finally {
      this.#wake = undefined;
      signal.removeEventListener('abort', onAbort);
    }
  }

  #enqueue(key: ProjectionKey): void {
    this.#queue.set(keyText(key), key);
    this.#wake?.();
  }

  #queuePod(podUID: string): void {
    for (const pod of this.#o.pods()) {
      if (pod.metadata?.uid !== podUID) continue;
      for (const v of pod.spec?.volumes ?? []) {
        (v.projected?.sources ?? []).forEach((s, i) => {
          if (podCertificateOf(s) !== undefined) this.#enqueue(projectionKey(pod, v.name, i));
        });
      }
    }
  }

  #random(): number {
    return (this.#o.random ?? Math.random)();
  }

  #jitter(): number {
    return Math.floor(this.#random() * JITTER_MS);
  }

  #changed(key: ProjectionKey): void {
    for (const l of this.#listeners) l(key.podUID);
  }

  /** One step of a projection's state machine (upstream's handleProjection). */
  async #handle(key: ProjectionKey, signal: AbortSignal): Promise<void> {
    const pod = [...this.#o.pods()].find((p) => p.metadata?.uid === key.podUID);
    if (pod === undefined) {
      this.forgetPod(key.podUID);
      return;
    }
    const volume = (pod.spec?.volumes ?? []).find((v) => v.name === key.volumeName);
    const source = podCertificateOf(volume?.projected?.sources?.[key.sourceIndex]);
    if (source === undefined) return;
    const id = keyText(key);
    let record = this.#records.get(id);
    if (record === undefined) {
      record = { key, state: { kind: 'initial' } };
      this.#records.set(id, record);
    }
    const now = this.#o.clock.now();
    const s = record.state;
    switch (s.kind) {
      case 'initial': {
        const created = await this.#create(pod, source, 'initial', signal);
        record.state = { kind: 'wait', ...created };
        return;
      }
      case 'wait': {
        const next = this.#outcome(pod, key, s.pcr, s.abandonAt, now);
        if (next === 'pending') return;
        if (next === 'gone') {
          record.state = { kind: 'initial' };
          throw new VolumeError(
            'BERTH_VOLUME_SOURCE_ERROR',
            `PodCertificateRequest "${key.namespace}/${s.pcr}" appears to have been deleted`,
          );
        }
        record.state = next.kind === 'issued' ? { kind: 'fresh', ...next.issued(s.key) } : next;
        this.#changed(key);
        return;
      }
      case 'denied':
      case 'failed':
        return;
      case 'fresh': {
        if (now < s.beginRefreshAt) return;
        this.#overdueEvents(pod, s, now);
        const created = await this.#create(pod, source, 'refresh', signal);
        record.state = {
          ...s,
          kind: 'waitRefresh',
          refreshKey: created.key,
          refreshPcr: created.pcr,
          refreshAbandonAt: created.abandonAt,
        };
        return;
      }
      case 'waitRefresh': {
        const next = this.#outcome(pod, key, s.refreshPcr, s.refreshAbandonAt, now);
        if (next === 'gone') {
          record.state = {
            kind: 'fresh',
            key: s.key,
            chain: s.chain,
            beginRefreshAt: s.beginRefreshAt,
            notAfter: s.notAfter,
            overdueEmitted: s.overdueEmitted,
            expiredEmitted: s.expiredEmitted,
          };
          throw new VolumeError(
            'BERTH_VOLUME_SOURCE_ERROR',
            'PodCertificateRequest appears to have been deleted',
          );
        }
        if (next === 'pending') {
          this.#overdueEvents(pod, s, now);
          return;
        }
        record.state =
          next.kind === 'issued' ? { kind: 'fresh', ...next.issued(s.refreshKey) } : next;
        this.#changed(key);
        return;
      }
    }
  }

  #overdueEvents(pod: Pod, s: Issued, now: number): void {
    if (now > s.beginRefreshAt + REFRESH_OVERDUE_MS && !s.overdueEmitted) {
      this.#event(pod, 'CertificateOverdueForRefresh', 'PodCertificate refresh overdue');
      s.overdueEmitted = true;
    }
    if (now > s.notAfter && !s.expiredEmitted) {
      this.#event(pod, 'CertificateExpired', 'PodCertificate expired');
      s.expiredEmitted = true;
    }
  }

  #event(pod: Pod, reason: string, message: string): void {
    this.#o.recorder.event(
      {
        kind: 'Pod',
        namespace: pod.metadata?.namespace ?? 'default',
        name: pod.metadata?.name ?? '',
        uid: pod.metadata?.uid ?? '',
      },
      'Warning',
      reason,
      message,
    );
  }

  /** What became of request `name`: still pending, gone, or a final condition. */
  #outcome(
    pod: Pod,
    key: ProjectionKey,
    name: string,
    abandonAt: number,
    now: number,
  ):
    | 'pending'
    | 'gone'
    | { kind: 'denied' | 'failed'; reason: string; message: string }
    | { kind: 'issued'; issued: (key: Buffer) => Issued } {
    const pcr = this.#requests.get(`${key.namespace}/${name}`);
    if (pcr === undefined) return now > abandonAt ? 'gone' : 'pending';
    const full = `${key.namespace}/${name}`;
    for (const c of pcr.status?.conditions ?? []) {
      if (c.type === 'Denied' || c.type === 'Failed') {
        const reason = c.reason ?? '';
        const message = c.message ?? '';
        const verb = c.type === 'Denied' ? 'was denied' : 'failed';
        // Upstream's Eventf passes the reason as the format and its text as an extra
        // argument; berth records the text it meant.
        this.#event(
          pod,
          c.type,
          `PodCertificateRequest ${full} ${verb}, reason=${JSON.stringify(reason)}, message=${JSON.stringify(message)}`,
        );
        return { kind: c.type === 'Denied' ? 'denied' : 'failed', reason, message };
      }
      if (c.type === 'Issued') {
        const status = pcr.status ?? {};
        const chain = Buffer.from(
          pemBlocks(status.certificateChain ?? '')
            .map(pemCertificate)
            .join(''),
          'utf8',
        );
        const beginRefreshAt = Date.parse(status.beginRefreshAt ?? '') + this.#jitter();
        const notAfter = Date.parse(status.notAfter ?? '');
        return {
          kind: 'issued',
          issued: (k) => ({
            key: k,
            chain,
            beginRefreshAt,
            notAfter,
            overdueEmitted: false,
            expiredEmitted: false,
          }),
        };
      }
    }
    return 'pending';
  }

  /** A new key and request; the request is abandoned when it vanishes after abandonAt. */
  async #create(
    pod: Pod,
    source: PodCertificateProjection,
    why: 'initial' | 'refresh',
    signal: AbortSignal,
  ): Promise<{ key: Buffer; pcr: string; abandonAt: number }> {
    const created = await createPodCertificateRequest(
      { kube: this.#o.kube, nodeName: this.#o.nodeName, nodeUID: this.#o.nodeUID() },
      pod,
      source,
      why,
      signal,
    );
    this.#log.debug('PodCertificateRequest created', {
      pod: `${pod.metadata?.namespace ?? 'default'}/${pod.metadata?.name ?? ''}`,
      pcr: created.name,
    });
    return {
      key: created.keyPem,
      pcr: created.name,
      abandonAt: (created.createdAt ?? this.#o.clock.now()) + ASSUME_DELETED_MS + this.#jitter(),
    };
  }
}
