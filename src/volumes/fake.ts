/**
 * A VolumeManager for other managers' unit tests: records every call and answers as the
 * host manager does (the same contract, contract.ts) without touching the filesystem:
 * volumes in upstream's layout under `rootDir`, mounts from volumeMounts, the same
 * validation errors. A test may still configure volumes, mounts and errors by hand.
 */
import type { Container, Pod, Volume } from 'kubernetes-types/core/v1.js';
import * as path from 'node:path';
import { cri } from '../cri/index.ts';
import { PLUGIN } from './manager.ts';
import { VolumeError, type MountedVolume, type PodVolumes, type VolumeManager } from './types.ts';

export type FakeVolumeCall =
  | { readonly op: 'setUpPod'; readonly uid: string }
  | { readonly op: 'containerMounts'; readonly uid: string; readonly container: string }
  | { readonly op: 'tearDownPod'; readonly uid: string }
  | { readonly op: 'cleanupOrphans'; readonly active: readonly string[] };

// As the host manager: volume names are DNS labels, pod UIDs name directories.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SAFE_UID = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

/** The plugin directory and read-only flag of the volume kinds the fake models. */
const KINDS: Readonly<Record<string, { plugin: string; readOnly: boolean }>> = {
  emptyDir: { plugin: PLUGIN.emptyDir, readOnly: false },
  configMap: { plugin: PLUGIN.configMap, readOnly: true },
  secret: { plugin: PLUGIN.secret, readOnly: true },
  downwardAPI: { plugin: PLUGIN.downwardAPI, readOnly: true },
  projected: { plugin: PLUGIN.projected, readOnly: true },
};

const PROPAGATION: Readonly<Record<string, cri.MountPropagation>> = {
  None: cri.MountPropagation.PROPAGATION_PRIVATE,
  HostToContainer: cri.MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
  Bidirectional: cri.MountPropagation.PROPAGATION_BIDIRECTIONAL,
};

function invalid(message: string): VolumeError {
  return new VolumeError('BERTH_VOLUME_INVALID', message);
}

export interface FakeVolumeManagerOptions {
  /** The kubelet root dir the reported paths are under (default /var/lib/kubelet). */
  readonly rootDir?: string;
}

export class FakeVolumeManager implements VolumeManager {
  readonly calls: FakeVolumeCall[] = [];
  /** Volumes setUpPod returns, by pod UID (default: derived from the pod's spec). */
  readonly volumes = new Map<string, MountedVolume[]>();
  /** Mounts containerMounts returns, by `<uid>/<container>` (default: from volumeMounts). */
  readonly mounts = new Map<string, cri.Mount[]>();
  /** UIDs whose pod directories "exist" (for cleanupOrphans); setUpPod adds to it. */
  readonly podUIDs = new Set<string>();
  /** What volumesInUse reports. */
  inUse: string[] = [];
  /** Errors the next call of an operation throws (then cleared). */
  readonly errors = new Map<FakeVolumeCall['op'], VolumeError>();
  readonly #rootDir: string;

  constructor(options: FakeVolumeManagerOptions = {}) {
    this.#rootDir = options.rootDir ?? '/var/lib/kubelet';
  }

  /** The error this call must fail with: the signal's reason or a configured one. */
  #failure(op: FakeVolumeCall['op'], signal: AbortSignal): Error | undefined {
    if (signal.aborted) {
      const reason: unknown = signal.reason;
      return reason instanceof Error ? reason : new DOMException('aborted', 'AbortError');
    }
    const err = this.errors.get(op);
    if (err !== undefined) this.errors.delete(op);
    return err;
  }

  volumesInUse(): string[] {
    return [...this.inUse];
  }

  setUpPod(pod: Pod, signal: AbortSignal): Promise<PodVolumes> {
    const uid = pod.metadata?.uid ?? '';
    this.calls.push({ op: 'setUpPod', uid });
    const err = this.#failure('setUpPod', signal);
    if (err !== undefined) return Promise.reject(err);
    try {
      const configured = this.volumes.get(uid);
      const volumes = configured ?? this.#derive(uid, pod.spec?.volumes ?? []);
      this.podUIDs.add(uid);
      return Promise.resolve({ byName: new Map(volumes.map((v) => [v.name, v])) });
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** The volumes the host manager would report for `volumes`, or its error. */
  #derive(uid: string, volumes: readonly Volume[]): MountedVolume[] {
    if (!SAFE_UID.test(uid))
      throw invalid(`pod UID ${JSON.stringify(uid)} cannot name a directory`);
    const seen = new Set<string>();
    for (const v of volumes) {
      if (v.name.length > 63 || !DNS_LABEL.test(v.name)) {
        throw invalid(`volume name ${JSON.stringify(v.name)} must be a DNS label`);
      }
      if (seen.has(v.name)) throw invalid(`volume name ${JSON.stringify(v.name)} is duplicated`);
      seen.add(v.name);
    }
    return volumes.map((v) => {
      if (v.hostPath !== undefined) {
        return {
          name: v.name,
          hostPath: v.hostPath.path,
          readOnly: false,
          plugin: PLUGIN.hostPath,
        };
      }
      const kind = Object.keys(KINDS).find(
        (k) => (v as unknown as Record<string, unknown>)[k] !== undefined,
      );
      const known = kind === undefined ? undefined : KINDS[kind];
      if (known === undefined) {
        throw invalid(
          `Unable to attach or mount volume ${JSON.stringify(v.name)}: no volume plugin matched`,
        );
      }
      const hostPath = path.join(this.#rootDir, 'pods', uid, 'volumes', known.plugin, v.name);
      return { name: v.name, hostPath, readOnly: known.readOnly, plugin: known.plugin };
    });
  }

  containerMounts(
    pod: Pod,
    container: Container,
    volumes: PodVolumes,
    _env: ReadonlyMap<string, string>,
    signal: AbortSignal,
  ): Promise<cri.Mount[]> {
    const uid = pod.metadata?.uid ?? '';
    this.calls.push({ op: 'containerMounts', uid, container: container.name });
    const err = this.#failure('containerMounts', signal);
    if (err !== undefined) return Promise.reject(err);
    const configured = this.mounts.get(`${uid}/${container.name}`);
    if (configured !== undefined) return Promise.resolve([...configured]);
    try {
      return Promise.resolve(this.#mountsOf(container, volumes));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** The mounts the host manager would hand to CRI (subPaths are not modelled). */
  #mountsOf(container: Container, volumes: PodVolumes): cri.Mount[] {
    return (container.volumeMounts ?? []).map((vm) => {
      const mv = volumes.byName.get(vm.name);
      if (mv === undefined) {
        throw invalid(
          `cannot find volume ${JSON.stringify(vm.name)} to mount into container ${JSON.stringify(container.name)}`,
        );
      }
      const mode = vm.mountPropagation ?? 'None';
      const propagation = PROPAGATION[mode];
      if (propagation === undefined)
        throw invalid(`invalid mountPropagation ${JSON.stringify(mode)}`);
      if (
        propagation === cri.MountPropagation.PROPAGATION_BIDIRECTIONAL &&
        container.securityContext?.privileged !== true
      ) {
        throw invalid('Bidirectional mount propagation is available only to privileged containers');
      }
      return {
        containerPath: vm.mountPath,
        hostPath: mv.hostPath,
        readonly: vm.readOnly === true || mv.readOnly,
        selinuxRelabel: false,
        propagation,
        uidMappings: [],
        gidMappings: [],
        recursiveReadOnly: false,
        image: undefined,
        imageSubPath: '',
        mountOptions: [],
      };
    });
  }

  tearDownPod(uid: string, signal: AbortSignal): Promise<void> {
    this.calls.push({ op: 'tearDownPod', uid });
    const err = this.#failure('tearDownPod', signal);
    if (err !== undefined) return Promise.reject(err);
    if (!SAFE_UID.test(uid)) {
      return Promise.reject(invalid(`pod UID ${JSON.stringify(uid)} cannot name a directory`));
    }
    this.podUIDs.delete(uid);
    return Promise.resolve();
  }

  cleanupOrphans(active: ReadonlySet<string>, signal: AbortSignal): Promise<string[]> {
    this.calls.push({ op: 'cleanupOrphans', active: [...active].sort() });
    const err = this.#failure('cleanupOrphans', signal);
    if (err !== undefined) return Promise.reject(err);
    const removed = [...this.podUIDs].filter((u) => !active.has(u)).sort();
    for (const u of removed) this.podUIDs.delete(u);
    return Promise.resolve(removed);
  }
}
