/**
 * The VolumeManager contract: what the pod sync observes of the volume manager. The
 * host manager (over real temp dirs, SystemMounter as root) and the fake pass it; both
 * run it from contract.test.ts. SubPaths, tmpfs media, claims and CSI need the host and
 * stay in manager.test.ts.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod, Volume } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { VolumeError, type VolumeErrorCode, type VolumeManager } from './types.ts';

/** What a factory builds: the manager, the root dir it works under, a host directory. */
export interface VolumeContractSubject {
  readonly vm: VolumeManager;
  /** The kubelet root dir the manager was given. */
  readonly rootDir: string;
  /** An existing host directory for hostPath volumes. */
  readonly hostDir: string;
  /** Removes whatever the subject left behind. */
  dispose(): Promise<void>;
}

const signal = new AbortController().signal;

function pod(uid: string, volumes: Volume[], containers: Container[] = []): Pod {
  return { metadata: { name: 'p', namespace: 'ns', uid }, spec: { volumes, containers } };
}

function code(c: VolumeErrorCode): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof VolumeError, String(err));
    assert.equal(err.code, c);
    return true;
  };
}

export function volumeManagerContract(
  name: string,
  make: () => Promise<VolumeContractSubject>,
): void {
  describe(`VolumeManager contract: ${name}`, () => {
    let s: VolumeContractSubject;
    before(async () => {
      s = await make();
    });
    after(() => s.dispose());

    const volumes = (): Volume[] => [
      { name: 'scratch', emptyDir: {} },
      { name: 'cfg', configMap: { name: 'c' } },
      { name: 'host', hostPath: { path: s.hostDir } },
    ];

    test('setUpPod reports each volume at its upstream path, and again when repeated', async () => {
      const dir = path.join(s.rootDir, 'pods', 'uid-a', 'volumes');
      const expected = [
        [
          'scratch',
          path.join(dir, 'kubernetes.io~empty-dir', 'scratch'),
          false,
          'kubernetes.io~empty-dir',
        ],
        ['cfg', path.join(dir, 'kubernetes.io~configmap', 'cfg'), true, 'kubernetes.io~configmap'],
        ['host', s.hostDir, false, 'kubernetes.io~host-path'],
      ];
      for (let i = 0; i < 2; i++) {
        const pv = await s.vm.setUpPod(pod('uid-a', volumes()), signal);
        assert.deepEqual(
          [...pv.byName.values()].map((v) => [v.name, v.hostPath, v.readOnly, v.plugin]),
          expected,
        );
      }
    });

    test('containerMounts gives one CRI mount per volumeMount, read-only where either says so', async () => {
      const p = pod('uid-a', volumes());
      const pv = await s.vm.setUpPod(p, signal);
      const c: Container = {
        name: 'app',
        volumeMounts: [
          { name: 'scratch', mountPath: '/scratch' },
          { name: 'cfg', mountPath: '/etc/cfg' },
          { name: 'host', mountPath: '/host', readOnly: true, mountPropagation: 'HostToContainer' },
        ],
      };
      const mounts = await s.vm.containerMounts(p, c, pv, new Map(), signal);
      assert.deepEqual(
        mounts.map((m) => [m.containerPath, m.hostPath, m.readonly, m.propagation]),
        [
          [
            '/scratch',
            pv.byName.get('scratch')?.hostPath,
            false,
            cri.MountPropagation.PROPAGATION_PRIVATE,
          ],
          [
            '/etc/cfg',
            pv.byName.get('cfg')?.hostPath,
            true,
            cri.MountPropagation.PROPAGATION_PRIVATE,
          ],
          ['/host', s.hostDir, true, cri.MountPropagation.PROPAGATION_HOST_TO_CONTAINER],
        ],
      );
      assert.deepEqual(await s.vm.containerMounts(p, { name: 'none' }, pv, new Map(), signal), []);
    });

    test('bad pods and mounts are refused with BERTH_VOLUME_INVALID', async () => {
      const dup: Volume[] = [
        { name: 'x', emptyDir: {} },
        { name: 'x', emptyDir: {} },
      ];
      await assert.rejects(s.vm.setUpPod(pod('uid-b', dup), signal), code('BERTH_VOLUME_INVALID'));
      await assert.rejects(
        s.vm.setUpPod(pod('uid-b', [{ name: 'Not_A_Label', emptyDir: {} }]), signal),
        code('BERTH_VOLUME_INVALID'),
      );
      await assert.rejects(
        s.vm.setUpPod(pod('../etc', [{ name: 'x', emptyDir: {} }]), signal),
        code('BERTH_VOLUME_INVALID'),
      );
      const p = pod('uid-a', volumes());
      const pv = await s.vm.setUpPod(p, signal);
      const missing: Container = { name: 'app', volumeMounts: [{ name: 'gone', mountPath: '/g' }] };
      await assert.rejects(
        s.vm.containerMounts(p, missing, pv, new Map(), signal),
        code('BERTH_VOLUME_INVALID'),
      );
      const bidi: Container = {
        name: 'app',
        volumeMounts: [{ name: 'host', mountPath: '/h', mountPropagation: 'Bidirectional' }],
      };
      await assert.rejects(
        s.vm.containerMounts(p, bidi, pv, new Map(), signal),
        code('BERTH_VOLUME_INVALID'),
      );
      const privileged: Container = { ...bidi, securityContext: { privileged: true } };
      const [m] = await s.vm.containerMounts(p, privileged, pv, new Map(), signal);
      assert.equal(m?.propagation, cri.MountPropagation.PROPAGATION_BIDIRECTIONAL);
    });

    // Only set-up: the host manager's tear-down checks the signal between unmounts, so
    // a pod with nothing mounted is removed even under an aborted signal.
    test('an aborted signal rejects set-up', async () => {
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      await assert.rejects(s.vm.setUpPod(pod('uid-c', volumes()), ac.signal), /stop/);
    });

    test('tearDownPod is idempotent; cleanupOrphans removes only pods not active, once', async () => {
      await s.vm.setUpPod(pod('uid-d', volumes()), signal);
      await s.vm.setUpPod(pod('uid-e', volumes()), signal);
      await s.vm.tearDownPod('uid-a', signal);
      await s.vm.tearDownPod('uid-a', signal);
      await s.vm.tearDownPod('never-set-up', signal);
      assert.deepEqual(await s.vm.cleanupOrphans(new Set(['uid-e']), signal), ['uid-d']);
      assert.deepEqual(await s.vm.cleanupOrphans(new Set(['uid-e']), signal), []);
      assert.deepEqual(await s.vm.cleanupOrphans(new Set(), signal), ['uid-e']);
      assert.deepEqual(s.vm.volumesInUse(), []);
    });
  });
}
