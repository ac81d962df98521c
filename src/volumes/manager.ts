/**
 * The host volume manager: per-pod volume directories under
 * `<rootDir>/pods/<uid>/volumes/<plugin>/<name>` (upstream's layout, so tooling that
 * knows the kubelet finds them), subPath binds under `.../volume-subpaths/`, teardown
 * and orphan cleanup. Content comes from the VolumeSourceResolver; hostPath volumes are
 * mounted straight from the host.
 */
import type { Container, Pod, Volume, VolumeMount } from 'kubernetes-types/core/v1.js';
import { chmod, mkdir, readdir, stat } from 'node:fs/promises';
import * as path from 'node:path';
import { cri } from '../cri/index.ts';
import { systemClock, type Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { AtomicWriter } from './atomic-writer.ts';
import { EMPTY_DIR_MODE, setUpEmptyDir, setUpMemoryDir } from './emptydir.ts';
import { checkVolumeModeUse, ClaimResolver } from './claims.ts';
import type { CsiVolumePlugin } from './csi/plugin.ts';
import { specFromInline, specFromPv } from './csi/spec.ts';
import { checkHostPathType } from './hostpath.ts';
import type { KubeClient } from '../kube/types.ts';
import { setVolumeOwnership } from './ownership.ts';
import type { Mounter } from './mounter.ts';
import { safeRemoveAll } from './safe-path.ts';
import { bindSubPath, expandSubPathExpr, validateSubPath } from './subpath.ts';
import {
  VolumeError,
  type MountedVolume,
  type PodVolumes,
  type VolumeManager,
  type VolumeSourceResolver,
} from './types.ts';

/** Upstream plugin directory names. */
export const PLUGIN = {
  emptyDir: 'kubernetes.io~empty-dir',
  configMap: 'kubernetes.io~configmap',
  secret: 'kubernetes.io~secret',
  downwardAPI: 'kubernetes.io~downward-api',
  projected: 'kubernetes.io~projected',
  hostPath: 'kubernetes.io~host-path',
  local: 'kubernetes.io~local-volume',
  image: 'kubernetes.io~image',
} as const;

const CONTENT_PLUGINS: ReadonlySet<string> = new Set([
  PLUGIN.configMap,
  PLUGIN.secret,
  PLUGIN.downwardAPI,
  PLUGIN.projected,
]);

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** Pod UIDs become directory names: only what a UUID (or a static pod hash) holds. */
const SAFE_UID = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

const PROPAGATION: Readonly<Record<string, cri.MountPropagation>> = {
  None: cri.MountPropagation.PROPAGATION_PRIVATE,
  HostToContainer: cri.MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
  Bidirectional: cri.MountPropagation.PROPAGATION_BIDIRECTIONAL,
};

export interface HostVolumeManagerOptions {
  /** The kubelet root dir (upstream's --root-dir, /var/lib/kubelet). */
  readonly rootDir: string;
  readonly mounter: Mounter;
  readonly sources: VolumeSourceResolver;
  readonly logger: Logger;
  readonly clock?: Clock;
  /** Resolves persistentVolumeClaim and ephemeral volumes; without it they are refused. */
  readonly kube?: KubeClient;
  /** CSI volumes (PV-backed and inline); without it they are refused. */
  readonly csi?: CsiVolumePlugin;
}

function invalid(message: string): VolumeError {
  return new VolumeError('BERTH_VOLUME_INVALID', message);
}

/** The volume source field set on `v` (the API allows exactly one). */
function volumeKind(v: Volume): string {
  const kinds = Object.keys(v).filter(
    (k) => k !== 'name' && (v as unknown as Record<string, unknown>)[k] !== undefined,
  );
  if (kinds.length !== 1) {
    throw invalid(
      `volume ${JSON.stringify(v.name)} must have exactly one source, has ${kinds.length}`,
    );
  }
  return kinds[0] ?? '';
}

function noPlugin(v: Volume, kind: string): VolumeError {
  return invalid(
    `Unable to attach or mount volume ${JSON.stringify(v.name)}: ` +
      `no volume plugin matched (${kind} volumes are not supported)`,
  );
}

function checkUid(uid: string | undefined): string {
  if (uid === undefined || !SAFE_UID.test(uid)) {
    throw invalid(`pod UID ${JSON.stringify(uid)} cannot name a directory`);
  }
  return uid;
}

/** VolumeManager over the host filesystem and a Mounter. */
export class HostVolumeManager implements VolumeManager {
  readonly #rootDir: string;
  readonly #mounter: Mounter;
  readonly #sources: VolumeSourceResolver;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #claims: ClaimResolver | undefined;
  readonly #csi: CsiVolumePlugin | undefined;

  constructor(options: HostVolumeManagerOptions) {
    this.#rootDir = options.rootDir;
    this.#mounter = options.mounter;
    this.#sources = options.sources;
    this.#logger = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#claims = options.kube === undefined ? undefined : new ClaimResolver(options.kube);
    this.#csi = options.csi;
  }

  /** node.status.volumesInUse (persistent CSI volumes mounted or being mounted). */
  volumesInUse(): string[] {
    return this.#csi?.volumesInUse() ?? [];
  }

  /** `<rootDir>/pods/<uid>`. */
  podDir(uid: string): string {
    return path.join(this.#rootDir, 'pods', checkUid(uid));
  }

  /** `<rootDir>/pods/<uid>/volumes/<plugin>/<name>`. */
  volumeDir(uid: string, plugin: string, name: string): string {
    return path.join(this.podDir(uid), 'volumes', plugin, name);
  }

  async setUpPod(pod: Pod, signal: AbortSignal): Promise<PodVolumes> {
    const uid = checkUid(pod.metadata?.uid);
    const log = this.#logger.child({
      pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      podUID: uid,
    });
    const volumes = pod.spec?.volumes ?? [];
    const seen = new Set<string>();
    for (const v of volumes) {
      if (v.name.length > 63 || !DNS_LABEL.test(v.name)) {
        throw invalid(`volume name ${JSON.stringify(v.name)} must be a DNS label`);
      }
      if (seen.has(v.name)) throw invalid(`volume name ${JSON.stringify(v.name)} is duplicated`);
      seen.add(v.name);
    }
    const byName = new Map<string, MountedVolume>();
    for (const v of volumes) {
      signal.throwIfAborted();
      try {
        byName.set(v.name, await this.#setUpVolume(pod, uid, v, log, signal));
      } catch (err) {
        throw signal.aborted ? err : hostFailure(v, err);
      }
    }
    return { byName };
  }

  async #setUpVolume(
    pod: Pod,
    uid: string,
    v: Volume,
    log: Logger,
    signal: AbortSignal,
  ): Promise<MountedVolume> {
    const kind = volumeKind(v);
    if (kind === 'persistentVolumeClaim' || kind === 'ephemeral') {
      return this.#setUpClaim(pod, uid, v, signal);
    }
    if (kind === 'csi') {
      const spec = specFromInline(pod, v);
      if (spec === undefined || this.#csi === undefined) throw noPlugin(v, kind);
      return this.#csi.setUp(pod, this.podDir(uid), spec, signal);
    }
    if (kind === 'image') {
      // As upstream's image plugin, a stub: nothing on the host; the runtime mounts the
      // image (kuberuntime/image-volumes.ts builds those container mounts).
      return { name: v.name, hostPath: '', readOnly: true, plugin: PLUGIN.image };
    }
    if (kind === 'hostPath' && v.hostPath !== undefined) {
      await checkHostPathType(v.hostPath.path, v.hostPath.type);
      return { name: v.name, hostPath: v.hostPath.path, readOnly: false, plugin: PLUGIN.hostPath };
    }
    if (kind === 'emptyDir' && v.emptyDir !== undefined) {
      const dir = this.volumeDir(uid, PLUGIN.emptyDir, v.name);
      // Parents first with 0750: the recursive mkdir below would make them 0777-umask.
      await mkdir(path.dirname(dir), { recursive: true, mode: 0o750 });
      const fsGroup = pod.spec?.securityContext?.fsGroup;
      await setUpEmptyDir(dir, v.emptyDir, { mounter: this.#mounter, signal, fsGroup });
      return { name: v.name, hostPath: dir, readOnly: false, plugin: PLUGIN.emptyDir };
    }
    const resolved = await this.#sources.payload(pod, v, signal);
    if (resolved === undefined) throw noPlugin(v, kind);
    if (!CONTENT_PLUGINS.has(resolved.plugin)) {
      throw invalid(`volume ${JSON.stringify(v.name)}: unknown plugin ${resolved.plugin}`);
    }
    const dir = this.volumeDir(uid, resolved.plugin, v.name);
    if (resolved.medium === 'memory') {
      if (await setUpMemoryDir(dir, undefined, this.#mounter, signal)) {
        log.debug('Mounted tmpfs for volume', { volume: v.name });
      }
    } else {
      await mkdir(dir, { recursive: true, mode: 0o750 });
    }
    // The volume root is the container's mount point: as upstream's emptyDir wrapper,
    // every container user must be able to traverse it (tmpfs keeps its 1777).
    if (((await stat(dir)).mode & 0o777) !== EMPTY_DIR_MODE) await chmod(dir, EMPTY_DIR_MODE);
    const fsGroup = pod.spec?.securityContext?.fsGroup;
    const writer = new AtomicWriter(dir, { clock: this.#clock, logger: log });
    if (await writer.write(resolved.payload, fsGroup === undefined ? {} : { fsGroup })) {
      log.info('Volume content updated', { volume: v.name, plugin: resolved.plugin });
    }
    return { name: v.name, hostPath: dir, readOnly: true, plugin: resolved.plugin };
  }

  /** A persistentVolumeClaim or generic ephemeral volume: the PV bound to its claim. */
  async #setUpClaim(pod: Pod, uid: string, v: Volume, signal: AbortSignal): Promise<MountedVolume> {
    if (this.#claims === undefined) throw noPlugin(v, volumeKind(v));
    const claimed = await this.#claims.resolve(pod, v, signal);
    if (claimed === undefined) throw noPlugin(v, volumeKind(v));
    checkVolumeModeUse(pod, v, claimed.volumeMode);
    const pv = claimed.pv;
    const pvName = pv.metadata?.name ?? '';
    const csi = specFromPv(v.name, pv, claimed.readOnly);
    if (claimed.volumeMode === 'Block') {
      // Block PVs are mapped, not mounted: a device for the containers' volumeDevices.
      if (csi === undefined || this.#csi === undefined) {
        throw invalid(
          `volume ${JSON.stringify(v.name)}: PV ${pvName} has volumeMode Block, which berth maps for CSI volumes only`,
        );
      }
      return this.#csi.mapBlock(pod, this.podDir(uid), csi, signal);
    }
    if (csi !== undefined) {
      if (this.#csi === undefined) throw noPlugin(v, 'csi');
      const mounted = await this.#csi.setUp(pod, this.podDir(uid), csi, signal);
      await this.#csi.expand(claimed.claim, pv, csi, this.podDir(uid), signal);
      return mounted;
    }
    const readOnly = claimed.readOnly;
    if (pv.spec?.hostPath !== undefined) {
      await checkHostPathType(pv.spec.hostPath.path, pv.spec.hostPath.type);
      return { name: v.name, hostPath: pv.spec.hostPath.path, readOnly, plugin: PLUGIN.hostPath };
    }
    if (pv.spec?.local !== undefined) {
      return this.#setUpLocal(pod, uid, v.name, pvName, pv.spec.local.path, readOnly, signal);
    }
    throw invalid(
      `Unable to attach or mount volume ${JSON.stringify(v.name)}: no volume plugin matched PV ${pvName} ` +
        `(berth mounts csi, local and hostPath persistent volumes)`,
    );
  }

  /** A local PV: its path bind-mounted at pods/<uid>/volumes/kubernetes.io~local-volume/<pv>. */
  async #setUpLocal(
    pod: Pod,
    uid: string,
    name: string,
    pvName: string,
    source: string,
    readOnly: boolean,
    signal: AbortSignal,
  ): Promise<MountedVolume> {
    if (!path.isAbsolute(source))
      throw invalid(`local PV ${pvName}: path ${source} is not absolute`);
    const dir = this.volumeDir(uid, PLUGIN.local, pvName);
    if (!(await this.#mounter.isMountPoint(dir).catch(() => false))) {
      const st = await stat(source).catch(() => undefined);
      if (st?.isDirectory() !== true) {
        throw new VolumeError(
          'BERTH_VOLUME_MOUNT_FAILED',
          `MountVolume.NewMounter initialization failed for volume ${JSON.stringify(pvName)} : path "${source}" does not exist`,
        );
      }
      await mkdir(dir, { recursive: true, mode: 0o750 });
      await this.#mounter.bindMount(source, dir, { readOnly }, signal);
      const fsGroup = pod.spec?.securityContext?.fsGroup;
      if (fsGroup !== undefined && !readOnly) {
        await setVolumeOwnership(dir, {
          fsGroup,
          policy: pod.spec?.securityContext?.fsGroupChangePolicy,
          signal,
        });
      }
    }
    return { name, hostPath: dir, readOnly, plugin: PLUGIN.local };
  }

  async containerMounts(
    pod: Pod,
    container: Container,
    volumes: PodVolumes,
    env: ReadonlyMap<string, string>,
    signal: AbortSignal,
  ): Promise<cri.Mount[]> {
    const uid = checkUid(pod.metadata?.uid);
    const out: cri.Mount[] = [];
    const mounts = container.volumeMounts ?? [];
    for (const [index, vm] of mounts.entries()) {
      signal.throwIfAborted();
      const mv = volumes.byName.get(vm.name);
      if (mv === undefined) {
        throw invalid(
          `cannot find volume ${JSON.stringify(vm.name)} to mount into container ${JSON.stringify(container.name)}`,
        );
      }
      if (mv.plugin === PLUGIN.image) {
        throw invalid(
          `volume ${JSON.stringify(vm.name)} is an image volume: the runtime mounts it`,
        );
      }
      const propagation = this.#propagation(vm, container);
      const subPath = this.#subPath(vm, env);
      let hostPath = mv.hostPath;
      if (subPath !== '') {
        hostPath = await bindSubPath({
          volumePath: mv.hostPath,
          subPath,
          target: path.join(
            this.podDir(uid),
            'volume-subpaths',
            vm.name,
            container.name,
            String(index),
          ),
          create: !mv.readOnly,
          mounter: this.#mounter,
          signal,
        });
      }
      out.push({
        containerPath: vm.mountPath,
        hostPath,
        readonly: vm.readOnly === true || mv.readOnly,
        selinuxRelabel: false,
        propagation,
        uidMappings: [],
        gidMappings: [],
        recursiveReadOnly: false,
        image: undefined,
        imageSubPath: '',
        mountOptions: [],
      });
    }
    return out;
  }

  #propagation(vm: VolumeMount, container: Container): cri.MountPropagation {
    const mode = vm.mountPropagation ?? 'None';
    const p = PROPAGATION[mode];
    if (p === undefined) throw invalid(`invalid mountPropagation ${JSON.stringify(mode)}`);
    if (p === cri.MountPropagation.PROPAGATION_BIDIRECTIONAL) {
      // As upstream's validation: only a privileged container may push mounts to the host.
      if (container.securityContext?.privileged !== true) {
        throw invalid('Bidirectional mount propagation is available only to privileged containers');
      }
    }
    return p;
  }

  #subPath(vm: VolumeMount, env: ReadonlyMap<string, string>): string {
    if (vm.subPath !== undefined && vm.subPath !== '' && vm.subPathExpr !== undefined) {
      throw invalid('subPath and subPathExpr are mutually exclusive');
    }
    const sub =
      vm.subPathExpr !== undefined && vm.subPathExpr !== ''
        ? expandSubPathExpr(vm.subPathExpr, env)
        : (vm.subPath ?? '');
    if (sub !== '') validateSubPath(sub);
    return sub;
  }

  async tearDownPod(uid: string, signal: AbortSignal): Promise<void> {
    const dir = this.podDir(uid);
    const log = this.#logger.child({ podUID: uid });
    // CSI volumes first, through their drivers: a failure stops here, so the generic
    // pass below never unmounts a driver's mount behind its back.
    await this.#csi?.tearDownPod(uid, dir, signal);
    // Deepest first, again until none is left: mounts may be stacked on one target.
    for (let round = 0; round < 16; round++) {
      const mounts = await this.#mounter.listMountsUnder(dir);
      if (mounts.length === 0) break;
      for (const m of mounts) {
        signal.throwIfAborted();
        await this.#mounter.unmount(m.mountPoint, signal);
        log.debug('Unmounted', { mountPoint: m.mountPoint });
      }
    }
    // safeRemoveAll checks the mount table again and refuses to cross a mount point.
    await safeRemoveAll(dir, { listMounts: () => this.#mounter.listMountsUnder(dir) });
    log.info('Removed pod volumes', { dir });
  }

  async cleanupOrphans(active: ReadonlySet<string>, signal: AbortSignal): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(path.join(this.#rootDir, 'pods'));
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return [];
      throw err;
    }
    const removed: string[] = [];
    for (const uid of names.sort()) {
      if (active.has(uid)) continue;
      signal.throwIfAborted();
      if (!SAFE_UID.test(uid)) {
        this.#logger.warn('Skipping unexpected entry in pods dir', { name: uid });
        continue;
      }
      try {
        await this.tearDownPod(uid, signal);
        removed.push(uid);
      } catch (err) {
        if (signal.aborted) throw err;
        // One stuck pod must not keep the others' leftovers around; retried next time.
        this.#logger.warn('Cannot clean up orphaned pod volumes', {
          podUID: uid,
          err: String(err),
        });
      }
    }
    // Staged CSI volumes no pod uses any more (a crash between stage and publish, or
    // pods deleted while berth was down).
    await this.#csi?.cleanupStaged(path.join(this.#rootDir, 'pods'), signal);
    return removed;
  }
}

/**
 * A host error while setting a volume up (the disk full, a read-only root, ...) as
 * upstream reports it, a FailedMount event `MountVolume.SetUp failed for volume "v" :
 * <error>`, instead of a bare errno error that only reached the log.
 */
function hostFailure(v: Volume, err: unknown): unknown {
  if (err instanceof VolumeError || !(err instanceof Error)) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === undefined || !/^E[A-Z0-9]+$/.test(code)) return err;
  return new VolumeError(
    'BERTH_VOLUME_MOUNT_FAILED',
    `MountVolume.SetUp failed for volume ${JSON.stringify(v.name)} : ${err.message}`,
    { cause: err },
  );
}
