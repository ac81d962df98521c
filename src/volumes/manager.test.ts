import assert from 'node:assert/strict';
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  readdir,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Container, Pod, Volume } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { HostVolumeManager, PLUGIN } from './manager.ts';
import { FakeMounter, SystemMounter, type Mounter } from './mounter.ts';
import { VolumeError, type ResolvedPayload, type VolumeSourceResolver } from './types.ts';

const signal = new AbortController().signal;

/** Content for configMap (disk) and secret (memory) volumes, changeable by the test. */
class TestSources implements VolumeSourceResolver {
  readonly data = new Map<string, string>([['key', 'v1']]);
  payload(_pod: Pod, v: Volume): Promise<ResolvedPayload | undefined> {
    const files = new Map(
      [...this.data].map(([k, d]) => [k, { data: Buffer.from(d), mode: 0o644 }]),
    );
    if (v.configMap !== undefined)
      return Promise.resolve({ payload: files, medium: 'disk', plugin: PLUGIN.configMap });
    if (v.secret !== undefined)
      return Promise.resolve({ payload: files, medium: 'memory', plugin: PLUGIN.secret });
    return Promise.resolve(undefined);
  }
}

function testPod(uid: string, volumes: Volume[], containers: Container[] = []): Pod {
  return { metadata: { name: 'p', namespace: 'ns', uid }, spec: { volumes, containers } };
}

async function unmountAll(m: Mounter, dir: string): Promise<void> {
  for (const e of await m.listMountsUnder(dir))
    await m.unmount(e.mountPoint).catch(() => undefined);
}

function invalid(re: RegExp): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof VolumeError, String(err));
    assert.equal(err.code, 'BERTH_VOLUME_INVALID');
    assert.match(err.message, re);
    return true;
  };
}

describe('HostVolumeManager', () => {
  let base = '';
  let rootDir = '';
  let hostDir = '';
  const mounter = new SystemMounter();
  let sources: TestSources;
  let vm: HostVolumeManager;
  beforeEach(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'berth-vm-'));
    rootDir = path.join(base, 'kubelet');
    hostDir = path.join(base, 'host');
    await mkdir(hostDir);
    sources = new TestSources();
    vm = new HostVolumeManager({
      rootDir,
      mounter,
      sources,
      logger: new MemoryLogger(),
      clock: new FakeClock(),
    });
  });
  afterEach(async () => {
    await unmountAll(mounter, base);
    await rm(base, { recursive: true, force: true });
  });

  const volumes = (): Volume[] => [
    { name: 'scratch', emptyDir: {} },
    { name: 'mem', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
    { name: 'cfg', configMap: { name: 'c' } },
    { name: 'sec', secret: { secretName: 's' } },
    { name: 'host', hostPath: { path: '', type: 'Directory' } },
  ];
  const withHost = (): Volume[] =>
    volumes().map((v) => (v.hostPath ? { ...v, hostPath: { ...v.hostPath, path: hostDir } } : v));

  it('sets up every volume in the upstream layout', async () => {
    try {
      const pv = await vm.setUpPod(testPod('uid-1', withHost()), signal);
      const pods = path.join(rootDir, 'pods', 'uid-1', 'volumes');
      assert.deepEqual(
        [...pv.byName.values()].map((v) => [v.name, v.hostPath, v.readOnly, v.plugin]),
        [
          [
            'scratch',
            path.join(pods, 'kubernetes.io~empty-dir', 'scratch'),
            false,
            'kubernetes.io~empty-dir',
          ],
          [
            'mem',
            path.join(pods, 'kubernetes.io~empty-dir', 'mem'),
            false,
            'kubernetes.io~empty-dir',
          ],
          [
            'cfg',
            path.join(pods, 'kubernetes.io~configmap', 'cfg'),
            true,
            'kubernetes.io~configmap',
          ],
          ['sec', path.join(pods, 'kubernetes.io~secret', 'sec'), true, 'kubernetes.io~secret'],
          ['host', hostDir, false, 'kubernetes.io~host-path'],
        ],
      );
      assert.equal(
        await readFile(path.join(pods, 'kubernetes.io~configmap', 'cfg', 'key'), 'utf8'),
        'v1',
      );
      assert.equal(
        await readFile(path.join(pods, 'kubernetes.io~secret', 'sec', 'key'), 'utf8'),
        'v1',
      );
      // Only root may walk into the pod's directory on the host (upstream: 0750).
      assert.equal((await stat(path.join(rootDir, 'pods', 'uid-1'))).mode & 0o777, 0o750);
      assert.equal((await stat(pods)).mode & 0o777, 0o750);
      // Non-root container users must be able to enter the content volume roots.
      assert.equal(
        (await stat(path.join(pods, 'kubernetes.io~configmap', 'cfg'))).mode & 0o777,
        0o777,
      );
      assert.equal(
        (await stat(path.join(pods, 'kubernetes.io~secret', 'sec'))).mode & 0o7777,
        0o1777,
      );
      const mounts = await mounter.listMountsUnder(rootDir);
      assert.deepEqual(mounts.map((m) => [path.basename(m.mountPoint), m.fsType]).sort(), [
        ['mem', 'tmpfs'],
        ['sec', 'tmpfs'],
      ]);
    } finally {
      await vm.tearDownPod('uid-1', signal);
    }
    assert.deepEqual(await mounter.listMountsUnder(rootDir), []);
    await assert.rejects(lstat(path.join(rootDir, 'pods', 'uid-1')), { code: 'ENOENT' });
  });

  it('refreshes content on every call and leaves an unchanged payload alone', async () => {
    const pod = testPod('uid-2', [{ name: 'cfg', configMap: { name: 'c' } }]);
    await vm.setUpPod(pod, signal);
    const dir = path.join(rootDir, 'pods/uid-2/volumes/kubernetes.io~configmap/cfg');
    const first = await readlink(path.join(dir, '..data'));
    await vm.setUpPod(pod, signal);
    assert.equal(await readlink(path.join(dir, '..data')), first);
    sources.data.set('key', 'v2');
    await vm.setUpPod(pod, signal);
    assert.notEqual(await readlink(path.join(dir, '..data')), first);
    assert.equal(await readFile(path.join(dir, 'key'), 'utf8'), 'v2');
    await vm.tearDownPod('uid-2', signal);
  });

  it('refuses unsupported kinds, duplicate and non-DNS-label names', async () => {
    await assert.rejects(
      vm.setUpPod(
        testPod('u', [{ name: 'data', persistentVolumeClaim: { claimName: 'c' } }]),
        signal,
      ),
      invalid(/volume "data".*no volume plugin matched \(persistentVolumeClaim/),
    );
    await assert.rejects(
      vm.setUpPod(
        testPod('u', [
          { name: 'a', emptyDir: {} },
          { name: 'a', emptyDir: {} },
        ]),
        signal,
      ),
      invalid(/duplicated/),
    );
    for (const name of ['a/b', '..', 'A', '']) {
      await assert.rejects(
        vm.setUpPod(testPod('u', [{ name, emptyDir: {} }]), signal),
        invalid(/DNS label/),
        name,
      );
    }
    await assert.rejects(vm.setUpPod(testPod('../x', []), signal), invalid(/pod UID/));
    await assert.rejects(lstat(path.join(rootDir, 'pods', 'u')), { code: 'ENOENT' });
  });

  it('reports a host error (ENOSPC, ENOTDIR, ...) as a MountVolume.SetUp VolumeError', async () => {
    // A file where the pod's volumes directory must go fails like a full disk: errno.
    await mkdir(path.join(rootDir, 'pods', 'u'), { recursive: true });
    await writeFile(path.join(rootDir, 'pods', 'u', 'volumes'), '');
    await assert.rejects(
      vm.setUpPod(testPod('u', [{ name: 'cfg', configMap: { name: 'c' } }]), signal),
      (err: unknown) => {
        assert.ok(err instanceof VolumeError, String(err));
        assert.equal(err.code, 'BERTH_VOLUME_MOUNT_FAILED');
        assert.match(err.message, /^MountVolume\.SetUp failed for volume "cfg" : E[A-Z]+: /);
        return true;
      },
    );
  });

  it('maps volumeMounts to CRI mounts with readOnly and propagation', async () => {
    const container: Container = {
      name: 'c',
      securityContext: { privileged: true },
      volumeMounts: [
        { name: 'scratch', mountPath: '/s' },
        { name: 'scratch', mountPath: '/ro', readOnly: true, mountPropagation: 'HostToContainer' },
        { name: 'cfg', mountPath: '/cfg', mountPropagation: 'None' },
        { name: 'host', mountPath: '/h', mountPropagation: 'Bidirectional' },
      ],
    };
    const pod = testPod('uid-3', withHost(), [container]);
    try {
      const pv = await vm.setUpPod(pod, signal);
      const mounts = await vm.containerMounts(pod, container, pv, new Map(), signal);
      assert.deepEqual(
        mounts.map((m) => [m.containerPath, m.hostPath, m.readonly, m.propagation]),
        [
          [
            '/s',
            pv.byName.get('scratch')?.hostPath,
            false,
            cri.MountPropagation.PROPAGATION_PRIVATE,
          ],
          [
            '/ro',
            pv.byName.get('scratch')?.hostPath,
            true,
            cri.MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
          ],
          ['/cfg', pv.byName.get('cfg')?.hostPath, true, cri.MountPropagation.PROPAGATION_PRIVATE],
          ['/h', hostDir, false, cri.MountPropagation.PROPAGATION_BIDIRECTIONAL],
        ],
      );
      const unprivileged: Container = {
        name: 'u',
        volumeMounts: [{ name: 'host', mountPath: '/h', mountPropagation: 'Bidirectional' }],
      };
      await assert.rejects(
        vm.containerMounts(pod, unprivileged, pv, new Map(), signal),
        invalid(/privileged/),
      );
      const unknown: Container = { name: 'u', volumeMounts: [{ name: 'nope', mountPath: '/x' }] };
      await assert.rejects(
        vm.containerMounts(pod, unknown, pv, new Map(), signal),
        invalid(/cannot find volume "nope" to mount into container "u"/),
      );
    } finally {
      await vm.tearDownPod('uid-3', signal);
    }
  });

  it('bind-mounts subPaths (created when missing) and expands subPathExpr', async () => {
    const container: Container = {
      name: 'app',
      volumeMounts: [
        { name: 'scratch', mountPath: '/a', subPath: 'made/here' },
        { name: 'scratch', mountPath: '/b', subPathExpr: 'logs/$(POD_NAME)/$(MISSING)' },
        { name: 'cfg', mountPath: '/etc/key', subPath: 'key', readOnly: true },
      ],
    };
    const pod = testPod('uid-4', withHost(), [container]);
    try {
      const pv = await vm.setUpPod(pod, signal);
      const scratch = pv.byName.get('scratch')?.hostPath ?? '';
      const mounts = await vm.containerMounts(
        pod,
        container,
        pv,
        new Map([['POD_NAME', 'p1']]),
        signal,
      );
      const sub = path.join(rootDir, 'pods/uid-4/volume-subpaths');
      assert.deepEqual(
        mounts.map((m) => [m.containerPath, m.hostPath, m.readonly]),
        [
          ['/a', path.join(sub, 'scratch/app/0'), false],
          ['/b', path.join(sub, 'scratch/app/1'), false],
          ['/etc/key', path.join(sub, 'cfg/app/2'), true],
        ],
      );
      // The unknown variable stays literal, as upstream.
      assert.ok((await stat(path.join(scratch, 'logs/p1/$(MISSING)'))).isDirectory());
      await writeFile(path.join(sub, 'scratch/app/0', 'through-bind'), 'x');
      assert.equal(await readFile(path.join(scratch, 'made/here/through-bind'), 'utf8'), 'x');
      assert.equal(await readFile(path.join(sub, 'cfg/app/2'), 'utf8'), 'v1');
      // A second call (container restart) reuses the binds instead of stacking them.
      await vm.containerMounts(pod, container, pv, new Map([['POD_NAME', 'p1']]), signal);
      assert.equal((await mounter.listMountsUnder(sub)).length, 3);
      // A missing subPath of a read-only volume is not created.
      const missing: Container = {
        name: 'm',
        volumeMounts: [{ name: 'cfg', mountPath: '/x', subPath: 'nokey' }],
      };
      await assert.rejects(
        vm.containerMounts(pod, missing, pv, new Map(), signal),
        invalid(/does not exist/),
      );
      assert.deepEqual(
        (await readdir(pv.byName.get('cfg')?.hostPath ?? '')).includes('nokey'),
        false,
      );
      await assert.rejects(
        vm.containerMounts(
          pod,
          {
            name: 'x',
            volumeMounts: [{ name: 'scratch', mountPath: '/x', subPath: 'a', subPathExpr: 'b' }],
          },
          pv,
          new Map(),
          signal,
        ),
        invalid(/mutually exclusive/),
      );
    } finally {
      await vm.tearDownPod('uid-4', signal);
    }
    assert.deepEqual(await mounter.listMountsUnder(rootDir), []);
    await assert.rejects(lstat(path.join(rootDir, 'pods', 'uid-4')), { code: 'ENOENT' });
  });

  it('tearDownPod is idempotent; cleanupOrphans removes only inactive pods', async () => {
    await vm.tearDownPod('never-set-up', signal);
    for (const uid of ['keep', 'gone-1', 'gone-2']) {
      await vm.setUpPod(testPod(uid, [{ name: 'mem', emptyDir: { medium: 'Memory' } }]), signal);
    }
    const removed = await vm.cleanupOrphans(new Set(['keep']), signal);
    assert.deepEqual(removed, ['gone-1', 'gone-2']);
    assert.deepEqual(await readdir(path.join(rootDir, 'pods')), ['keep']);
    assert.equal((await mounter.listMountsUnder(rootDir)).length, 1);
    assert.deepEqual(await vm.cleanupOrphans(new Set(['keep']), signal), []);
    await vm.tearDownPod('keep', signal);
    assert.deepEqual(await vm.cleanupOrphans(new Set(), signal), []);
  });

  it('works over the FakeMounter: tmpfs and subPath binds recorded, all unmounted on teardown', async () => {
    const fake = new FakeMounter();
    const fvm = new HostVolumeManager({
      rootDir,
      mounter: fake,
      sources,
      logger: new MemoryLogger(),
    });
    const c: Container = {
      name: 'c',
      volumeMounts: [{ name: 'sec', mountPath: '/k', subPath: 'key' }],
    };
    const pod = testPod('uid-f', [{ name: 'sec', secret: { secretName: 's' } }], [c]);
    const pv = await fvm.setUpPod(pod, signal);
    await fvm.setUpPod(pod, signal);
    await fvm.containerMounts(pod, c, pv, new Map(), signal);
    assert.deepEqual(
      fake.mounts.map((m) => [m.kind, path.relative(rootDir, m.target)]),
      [
        ['tmpfs', 'pods/uid-f/volumes/kubernetes.io~secret/sec'],
        ['bind', 'pods/uid-f/volume-subpaths/sec/c/0'],
      ],
    );
    assert.match(fake.mounts[1]?.source ?? '', /^\/proc\/\d+\/fd\/\d+$/);
    await fvm.tearDownPod('uid-f', signal);
    assert.deepEqual(fake.mounts, []);
    await assert.rejects(lstat(path.join(rootDir, 'pods', 'uid-f')), { code: 'ENOENT' });
  });

  it('cleanupOrphans without a pods dir returns nothing; an aborted signal stops it', async () => {
    assert.deepEqual(await vm.cleanupOrphans(new Set(), signal), []);
    await vm.setUpPod(testPod('x', [{ name: 'a', emptyDir: {} }]), signal);
    const ac = new AbortController();
    ac.abort(new Error('shutdown'));
    await assert.rejects(vm.cleanupOrphans(new Set(), ac.signal), /shutdown/);
    await vm.tearDownPod('x', signal);
  });
});
