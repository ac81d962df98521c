/**
 * The kubelet with the systemd cgroup driver (the runtime answers "systemd") and the
 * systemd manager over the fake bus: the QoS slices are made at start, each pod gets
 * its slice with its limits, and systemd refusing a pod's slice is a
 * FailedCreatePodContainer event and a retry, not a crash.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeCgroupManager } from '../cm/fake.ts';
import { FakeSystemdBus } from '../cm/fake-systemd.ts';
import { SystemdCgroupManager } from '../cm/systemd.ts';
import { CgroupDriver } from '../cri/gen/runtime/v1/api.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeMounter } from '../volumes/mounter.ts';
import { Kubelet } from './kubelet.ts';
import { host, testKubeletOptions, untilOnClock } from './testing.ts';

const options = {
  ...(await testKubeletOptions()),
  cgroupDriver: 'systemd' as const,
  cgroupRoot: '/',
};
const mountRoot = await mkdtemp(join(tmpdir(), 'berth-kubelet-slices-'));
after(async () => {
  await rm(options.rootDir, { recursive: true, force: true });
  await rm(mountRoot, { recursive: true, force: true });
});

test('systemd driver: QoS and pod slices through systemd; a refused slice is an event', async () => {
  const clock = new FakeClock();
  const kube = new FakeKubeClient({ clock });
  const cri = new FakeCriClient({
    flavor: 'containerd2',
    cgroupDriver: CgroupDriver.SYSTEMD,
    clock,
  });
  cri.addImage('berth.local/busybox:1', { preloaded: true });
  const recorder = new MemoryEventRecorder();
  const bus = new FakeSystemdBus({ mountRoot });
  const cgroupfs = new FakeCgroupManager();
  const kubelet = new Kubelet(options, {
    kube,
    cri,
    recorder,
    clock,
    logger: new MemoryLogger(),
    host,
    mounter: new FakeMounter(),
    cgroups: cgroupfs,
    systemdCgroups: new SystemdCgroupManager({ version: 'v2', bus, mountRoot }),
  });
  await kubelet.start();
  try {
    assert.ok(bus.units.has('kubepods.slice'));
    assert.ok(bus.units.has('kubepods-burstable.slice'));
    assert.ok(bus.units.has('kubepods-besteffort.slice'));
    // The first attempt at the pod's slice is refused by systemd.
    bus.failNext('startTransientUnit', 'org.freedesktop.DBus.Error.AccessDenied');
    const pod: Pod = {
      metadata: { name: 'g', namespace: 'default' },
      spec: {
        nodeName: 'node-a',
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: 'berth.local/busybox:1',
            imagePullPolicy: 'IfNotPresent',
            command: ['sleep', '3600'],
            resources: { limits: { cpu: '250m', memory: '64Mi' } },
          },
        ],
      },
    };
    const created = await kube.create(inNamespace(PODS, 'default'), pod);
    const uid = (created.metadata?.uid ?? '').replace(/-/g, '_');
    await untilOnClock(clock, 'FailedCreatePodContainer', () =>
      Promise.resolve(recorder.reasons().includes('FailedCreatePodContainer') ? true : undefined),
    );
    // A pod update syncs it again without waiting out the worker's error back-off.
    await kube.patch(
      inNamespace(PODS, 'default'),
      'g',
      { metadata: { labels: { retry: '1' } } },
      'merge',
    );
    // Less fake time than the back-off (10 s): the update, not the retry, ran the sync.
    await untilOnClock(
      clock,
      'pod Running',
      async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'g');
        return p.status?.phase === 'Running' ? p : undefined;
      },
      9_000,
    );
    const event = recorder.events.find((e) => e.reason === 'FailedCreatePodContainer');
    assert.match(event?.message ?? '', /^unable to ensure pod container exists: .*AccessDenied/);
    const dir = join(mountRoot, `kubepods.slice/kubepods-pod${uid}.slice`);
    assert.equal((await readFile(join(dir, 'cpu.max'), 'utf8')).trim(), '25000 100000');
    assert.equal((await readFile(join(dir, 'memory.max'), 'utf8')).trim(), String(64 << 20));
    assert.equal(cgroupfs.groups.size, 0, 'nothing went to the cgroupfs manager');
    await kube.delete(inNamespace(PODS, 'default'), 'g', { gracePeriodSeconds: 1 });
    await untilOnClock(clock, 'pod slice stopped', () =>
      Promise.resolve(bus.units.has(`kubepods-pod${uid}.slice`) ? undefined : true),
    );
  } finally {
    await kubelet.stop();
    cri.close();
    await kube.close();
  }
});
