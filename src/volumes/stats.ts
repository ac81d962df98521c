/**
 * Volume usage for /stats/summary, the eviction manager and the kubelet_volume_stats_*
 * gauges: upstream's fsResourceAnalyzer and volumeStatCalculator
 * (pkg/kubelet/server/stats) over berth's on-disk layout. Every volumeStatsAggPeriod
 * each known pod's volume directories (`<rootDir>/pods/<uid>/volumes/<plugin>/<dir>`)
 * are measured and the result cached; readers only ever read the cache.
 *
 * How each plugin is measured is upstream's choice of MetricsProvider:
 * - emptyDir: MetricsDu (a du-style walk for used bytes and inodes, statfs for the rest);
 * - configMap, secret, projected, downwardAPI: MetricsDu, measured once per pod and then
 *   cached (upstream wraps them in NewCachedMetrics: their content is small and fixed);
 * - local PVs: MetricsStatFS (the backing filesystem, statfs only);
 * - CSI: NodeGetVolumeStats when the driver has GET_VOLUME_STATS; without it upstream
 *   reports nothing (NotSupported), and neither does berth;
 * - hostPath has no metrics upstream (MetricsNil) and berth makes no directory for it.
 *
 * Directory names map back to the pod's volume names through the spec: content volumes
 * and inline CSI volumes use the volume name, claims the bound PV's name, so the pod's
 * claims are read through the API (the PV name cached for one period).
 *
 * Each pod is measured on its own: a pod whose measurement is still running (a slow
 * driver, a huge emptyDir) is skipped in the next round while the others go on, and every
 * volume gets a deadline. Failures are logged once per volume until it recovers.
 */
import { readdir } from 'node:fs/promises';
import * as path from 'node:path';
import type { PersistentVolumeClaim, Pod, Volume } from 'kubernetes-types/core/v1.js';
import type { CsiDriverRegistry } from '../csi/types.ts';
import { inNamespace, PERSISTENTVOLUMECLAIMS, type KubeClient } from '../kube/types.ts';
import { diskUsage, statFs } from '../stats/disk-usage.ts';
import type { PodVolumeStats, VolumeStats } from '../stats/types.ts';
import type { Clock } from '../util/clock.ts';
import { withDeadline } from '../util/deadline.ts';
import { BerthError, isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { claimName } from './claims.ts';
import { CSI_PLUGIN_DIR } from './csi/paths.ts';
import { loadVolData } from './csi/vol-data.ts';
import { PLUGIN } from './manager.ts';

/** Upstream's csiTimeout: the longest one volume's measurement may take. */
export const DEFAULT_VOLUME_STATS_TIMEOUT_MS = 2 * 60_000;

export type VolumeStatsErrorCode =
  /** A volume's measurement outlived its deadline. */
  | 'BERTH_VOLUME_STATS_DEADLINE'
  /** The volume's CSI driver is not registered on this node. */
  | 'BERTH_VOLUME_STATS_NO_DRIVER'
  /** The driver's NodeGetVolumeStats answer had no usage. */
  | 'BERTH_VOLUME_STATS_BAD_REPLY';

export class VolumeStatsError extends BerthError {
  declare readonly code: VolumeStatsErrorCode;
  // Not useless: it narrows the accepted codes to VolumeStatsErrorCode.
  // eslint-disable-next-line @typescript-eslint/no-useless-constructor
  constructor(code: VolumeStatsErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** Where the collection-duration histogram is recorded (kubelet_volume_metric_collection_duration_seconds). */
export interface VolumeStatsRecorder {
  /** `source`: "du", "statfs" or the CSI driver's name, as upstream's metric_source. */
  collected(source: string, seconds: number): void;
}

export interface VolumeStatsCollectorOptions {
  readonly rootDir: string;
  /** volumeStatsAggPeriod; zero or less turns collection off (upstream's check). */
  readonly periodMs: number;
  /** The pods whose volumes are measured (upstream's podManager.GetPods()). */
  readonly pods: () => Iterable<Pod>;
  readonly kube: KubeClient;
  readonly csi: CsiDriverRegistry;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Per-volume deadline (default DEFAULT_VOLUME_STATS_TIMEOUT_MS). */
  readonly timeoutMs?: number;
  readonly recorder?: VolumeStatsRecorder;
}

/** The numbers of one volume as upstream's volume.Metrics (all present, 0 when unknown). */
interface Measured {
  readonly time: number;
  readonly capacityBytes: number;
  readonly availableBytes: number;
  readonly usedBytes: number;
  readonly inodes: number;
  readonly inodesFree: number;
  readonly inodesUsed: number;
}

/** A volume directory resolved to the pod volume it holds and how to measure it. */
interface Target {
  /** `<plugin>/<dir>`, the key of cached measurements and of failure logs. */
  readonly key: string;
  readonly volume: Volume;
  readonly dir: string;
  readonly how:
    | { readonly kind: 'du'; readonly cached: boolean }
    | { readonly kind: 'statfs' }
    | { readonly kind: 'csi'; readonly driver: string; readonly volumeHandle: string };
}

interface PodState {
  latest: PodVolumeStats | undefined;
  running: Promise<void> | undefined;
  /** Content volumes measured once (upstream's NewCachedMetrics). */
  readonly cached: Map<string, Measured>;
  /** Volumes whose last measurement failed (logged once until they recover). */
  readonly failing: Set<string>;
}

const CONTENT_PLUGINS: ReadonlyMap<string, keyof Volume> = new Map([
  [PLUGIN.configMap, 'configMap'],
  [PLUGIN.secret, 'secret'],
  [PLUGIN.projected, 'projected'],
  [PLUGIN.downwardAPI, 'downwardAPI'],
]);

/** Upstream's util.IsLocalEphemeralVolume: these count towards ephemeral-storage. */
export function isLocalEphemeralVolume(v: Volume): boolean {
  return (
    v.gitRepo !== undefined ||
    (v.emptyDir !== undefined && (v.emptyDir.medium ?? '') === '') ||
    v.configMap !== undefined
  );
}

function isMissing(err: unknown): boolean {
  return (err as { code?: unknown }).code === 'ENOENT';
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function deadlinePassed(what: string, ms: number): VolumeStatsError {
  return new VolumeStatsError(
    'BERTH_VOLUME_STATS_DEADLINE',
    `Cannot measure ${what} within ${ms / 1000}s: the deadline passed`,
  );
}

/** Measures every known pod's volumes each period and keeps the latest per pod. */
export class VolumeStatsCollector {
  readonly #o: VolumeStatsCollectorOptions;
  readonly #log: Logger;
  readonly #pods = new Map<string, PodState>();
  /** `<namespace>/<claim>` -> the bound PV's name, read at most once per period. */
  readonly #claims = new Map<string, { pv: string | undefined; at: number }>();

  constructor(options: VolumeStatsCollectorOptions) {
    this.#o = options;
    this.#log = options.logger;
  }

  /** The pod's latest volume usage; undefined until one of its volumes was measured. */
  podStats(uid: string): PodVolumeStats | undefined {
    return this.#pods.get(uid)?.latest;
  }

  /** Every pod's latest volume usage (for the kubelet_volume_stats_* gauges). */
  *all(): IterableIterator<PodVolumeStats> {
    for (const s of this.#pods.values()) if (s.latest !== undefined) yield s.latest;
  }

  /** Measures every period until `signal` aborts; waits for measurements in flight. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#o.periodMs <= 0) {
      this.#log.info('Volume stats collection disabled');
      return;
    }
    this.#log.info('Starting volume stats collection', { periodMs: this.#o.periodMs });
    try {
      while (!signal.aborted) {
        this.round(signal);
        await this.#o.clock.sleep(this.#o.periodMs, signal).catch(() => undefined);
      }
    } finally {
      await this.settled();
    }
  }

  /** Resolves once every measurement in flight has finished (never rejects). */
  async settled(): Promise<void> {
    const running = [...this.#pods.values()].map((s) => s.running);
    await Promise.all(running.filter((p) => p !== undefined));
  }

  /**
   * One round: forgets pods that are gone and starts measuring every pod whose previous
   * measurement has finished. The measurements run on (each pod's state holds its
   * promise, which never rejects); `settled()` waits for them.
   */
  round(signal: AbortSignal): void {
    const live = new Set<string>();
    for (const pod of this.#o.pods()) {
      const uid = pod.metadata?.uid ?? '';
      if (uid === '') continue;
      live.add(uid);
      let state = this.#pods.get(uid);
      if (state === undefined) {
        state = { latest: undefined, running: undefined, cached: new Map(), failing: new Set() };
        this.#pods.set(uid, state);
      }
      if (state.running !== undefined) {
        this.#log.debug('Volume stats of the pod are still being measured', this.#podFields(pod));
        continue;
      }
      const s = state;
      s.running = this.#measurePod(pod, s, signal)
        .catch((err: unknown) => {
          if (isAborted(signal)) return;
          // Logged once until the listing works again, as a failing volume is.
          const fields = { ...this.#podFields(pod), error: describe(err) };
          if (s.failing.has('')) this.#log.debug('Cannot list the volumes of the pod', fields);
          else this.#log.warn('Cannot list the volumes of the pod', fields);
          s.failing.add('');
        })
        .finally(() => {
          s.running = undefined;
        });
    }
    // A pod that is gone is forgotten; a measurement still running for it finds its
    // state dropped and stores nothing.
    for (const uid of this.#pods.keys()) if (!live.has(uid)) this.#pods.delete(uid);
    const now = this.#o.clock.monotonic();
    for (const [k, c] of this.#claims) if (now - c.at >= this.#o.periodMs) this.#claims.delete(k);
  }

  #podFields(pod: Pod): { pod: string; podUID: string } {
    return {
      pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      podUID: pod.metadata?.uid ?? '',
    };
  }

  async #measurePod(pod: Pod, state: PodState, signal: AbortSignal): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const timeoutMs = this.#o.timeoutMs ?? DEFAULT_VOLUME_STATS_TIMEOUT_MS;
    // Listing reads the pod's claims from the API: bounded like a measurement.
    const targets = await withDeadline(
      this.#o.clock,
      signal,
      timeoutMs,
      () => deadlinePassed(`the volumes of pod ${this.#podFields(pod).pod}`, timeoutMs),
      (s) => this.#targets(pod, s),
    );
    state.failing.delete('');
    // Upstream stores nothing for a pod without mounted volumes (ListVolumesForPod: not found).
    if (targets.length === 0) return;
    const ns = pod.metadata?.namespace ?? 'default';
    const results = await Promise.all(
      targets.map(async (t) => {
        const m = await this.#measureVolume(pod, t, state, signal);
        if (m === undefined) return undefined;
        const claim = claimName(pod, t.volume);
        const stats: VolumeStats = {
          name: t.volume.name,
          ...(claim !== undefined && { pvcRef: { name: claim, namespace: ns } }),
          time: new Date(m.time).toISOString(),
          availableBytes: m.availableBytes,
          capacityBytes: m.capacityBytes,
          usedBytes: m.usedBytes,
          inodesFree: m.inodesFree,
          inodes: m.inodes,
          inodesUsed: m.inodesUsed,
        };
        return { stats, ephemeral: isLocalEphemeralVolume(t.volume) };
      }),
    );
    if (signal.aborted || this.#pods.get(uid) !== state) return;
    const byName = (a: VolumeStats, b: VolumeStats): number => a.name.localeCompare(b.name);
    const measured = results.filter((r) => r !== undefined);
    state.latest = {
      ephemeral: measured
        .filter((r) => r.ephemeral)
        .map((r) => r.stats)
        .sort(byName),
      persistent: measured
        .filter((r) => !r.ephemeral)
        .map((r) => r.stats)
        .sort(byName),
    };
  }

  /** One volume's numbers; undefined when it has none (not supported, or it failed: logged). */
  async #measureVolume(
    pod: Pod,
    t: Target,
    state: PodState,
    signal: AbortSignal,
  ): Promise<Measured | undefined> {
    const cached = state.cached.get(t.key);
    if (cached !== undefined) return cached;
    const fields = { ...this.#podFields(pod), volume: t.volume.name };
    const what = `volume ${JSON.stringify(t.volume.name)} of pod ${fields.pod}`;
    const started = this.#o.clock.now();
    try {
      const ms = this.#o.timeoutMs ?? DEFAULT_VOLUME_STATS_TIMEOUT_MS;
      const m = await withDeadline(
        this.#o.clock,
        signal,
        ms,
        () => deadlinePassed(what, ms),
        (s) => this.#measure(t, started, s),
      );
      if (m !== undefined && t.how.kind === 'du' && t.how.cached) state.cached.set(t.key, m);
      if (state.failing.delete(t.key)) this.#log.info('Volume stats available again', fields);
      return m;
    } catch (err) {
      if (isAborted(signal)) return undefined;
      const detail = { ...fields, path: t.dir, error: describe(err) };
      if (state.failing.has(t.key)) this.#log.debug('Failed to calculate volume metrics', detail);
      else this.#log.warn('Failed to calculate volume metrics', detail);
      state.failing.add(t.key);
      return undefined;
    }
  }

  async #measure(t: Target, time: number, signal: AbortSignal): Promise<Measured | undefined> {
    const clock = this.#o.clock;
    const record = (source: string, since: number): void => {
      this.#o.recorder?.collected(source, (clock.now() - since) / 1000);
    };
    switch (t.how.kind) {
      case 'du': {
        const usage = await diskUsage(t.dir, signal);
        record('du', time);
        const fs = await statFs(t.dir);
        return { ...fs, time, usedBytes: usage.bytes, inodesUsed: usage.inodes };
      }
      case 'statfs': {
        const fs = await statFs(t.dir);
        record('statfs', time);
        return { ...fs, time };
      }
      case 'csi':
        return this.#measureCsi(t.how.driver, t.how.volumeHandle, t.dir, time, signal);
    }
  }

  /** upstream's metricsCsi.GetMetrics. */
  async #measureCsi(
    driver: string,
    volumeHandle: string,
    targetPath: string,
    time: number,
    signal: AbortSignal,
  ): Promise<Measured | undefined> {
    const client = this.#o.csi.client(driver);
    if (client === undefined) {
      throw new VolumeStatsError(
        'BERTH_VOLUME_STATS_NO_DRIVER',
        `driver name ${driver} not found in the list of registered CSI drivers`,
      );
    }
    const caps = await client.nodeGetCapabilities(signal);
    if (!caps.getVolumeStats) return undefined;
    // Upstream sends no staging path (csi_client.go NodeGetVolumeStats).
    const reply = await client.nodeGetVolumeStats(volumeHandle, targetPath, '', signal);
    this.#o.recorder?.collected(driver, (this.#o.clock.now() - time) / 1000);
    if (reply.usage.length === 0) {
      throw new VolumeStatsError(
        'BERTH_VOLUME_STATS_BAD_REPLY',
        'failed to get usage from response. usage is nil',
      );
    }
    let m: Measured = {
      time,
      capacityBytes: 0,
      availableBytes: 0,
      usedBytes: 0,
      inodes: 0,
      inodesFree: 0,
      inodesUsed: 0,
    };
    for (const u of reply.usage) {
      if (u.unit === 'BYTES') {
        m = {
          ...m,
          availableBytes: Number(u.available),
          capacityBytes: Number(u.total),
          usedBytes: Number(u.used),
        };
      } else if (u.unit === 'INODES') {
        m = {
          ...m,
          inodesFree: Number(u.available),
          inodes: Number(u.total),
          inodesUsed: Number(u.used),
        };
      } else {
        this.#log.warn('Unknown unit in VolumeUsage', { driver, unit: u.unit });
      }
    }
    return m;
  }

  /** The pod's volume directories that map to one of its volumes, with how to measure each. */
  async #targets(pod: Pod, signal: AbortSignal): Promise<Target[]> {
    const uid = pod.metadata?.uid ?? '';
    const volumesDir = path.join(this.#o.rootDir, 'pods', uid, 'volumes');
    let plugins: string[];
    try {
      plugins = await readdir(volumesDir);
    } catch (err) {
      if (isMissing(err)) return [];
      throw err;
    }
    const spec = new Map((pod.spec?.volumes ?? []).map((v) => [v.name, v]));
    const out: Target[] = [];
    for (const plugin of plugins.sort()) {
      const pluginDir = path.join(volumesDir, plugin);
      const dirs = await readdir(pluginDir).catch((err: unknown) => {
        // A file where a plugin directory would be holds no volumes.
        if (isMissing(err) || (err as { code?: unknown }).code === 'ENOTDIR') return [];
        throw err;
      });
      for (const name of dirs.sort()) {
        const key = `${plugin}/${name}`;
        const dir = path.join(pluginDir, name);
        const byName = spec.get(name);
        const content = CONTENT_PLUGINS.get(plugin);
        if (plugin === PLUGIN.emptyDir && byName?.emptyDir !== undefined) {
          out.push({ key, volume: byName, dir, how: { kind: 'du', cached: false } });
        } else if (content !== undefined && byName?.[content] !== undefined) {
          out.push({ key, volume: byName, dir, how: { kind: 'du', cached: true } });
        } else if (plugin === PLUGIN.local) {
          const v = await this.#claimedVolume(pod, name, signal);
          if (v !== undefined) out.push({ key, volume: v, dir, how: { kind: 'statfs' } });
        } else if (plugin === CSI_PLUGIN_DIR) {
          const data = await loadVolData(dir).catch((err: unknown) => {
            // Unreadable: the volume is left out; the others of the pod are still measured.
            this.#log.debug('Cannot read the vol_data.json of a CSI volume', {
              ...this.#podFields(pod),
              path: dir,
              error: describe(err),
            });
            return undefined;
          });
          if (data === undefined) continue;
          const v =
            byName?.csi !== undefined ? byName : await this.#claimedVolume(pod, name, signal);
          if (v === undefined) continue;
          out.push({
            key,
            volume: v,
            dir: path.join(dir, 'mount'),
            how: { kind: 'csi', driver: data.driverName, volumeHandle: data.volumeHandle },
          });
        }
      }
    }
    return out;
  }

  /** The pod's claim-based volume whose claim is bound to PV `pvName`, if any. */
  async #claimedVolume(pod: Pod, pvName: string, signal: AbortSignal): Promise<Volume | undefined> {
    const ns = pod.metadata?.namespace ?? 'default';
    for (const v of pod.spec?.volumes ?? []) {
      const claim = claimName(pod, v);
      if (claim === undefined) continue;
      if ((await this.#boundPv(ns, claim, signal)) === pvName) return v;
    }
    return undefined;
  }

  async #boundPv(ns: string, claim: string, signal: AbortSignal): Promise<string | undefined> {
    const key = `${ns}/${claim}`;
    const hit = this.#claims.get(key);
    if (hit !== undefined) return hit.pv;
    let pv: string | undefined;
    try {
      const pvc = await this.#o.kube.get<PersistentVolumeClaim>(
        inNamespace(PERSISTENTVOLUMECLAIMS, ns),
        claim,
        { signal },
      );
      pv = pvc.spec?.volumeName;
    } catch (err) {
      if (isAborted(signal)) throw err;
      // Not cached: the next round asks again.
      this.#log.debug('Cannot read the claim of a volume for its stats', {
        claim: key,
        error: describe(err),
      });
      return undefined;
    }
    this.#claims.set(key, { pv, at: this.#o.clock.monotonic() });
    return pv;
  }
}
