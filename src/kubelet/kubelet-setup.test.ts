/**
 * The kubelet's container set-up against the fake API server and runtime: a pod with
 * a configMap volume, env from a configMap and a postStart hook gets its files on disk
 * under the root dir, the mounts, /etc/hosts and termination-message file in its CRI
 * container config, its environment, and the hook run through ExecSync.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import { FakeCgroupManager } from '../cm/fake.ts';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { readFile } from 'node:fs/promises';
import type { cri as api } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { CONFIGMAPS, inNamespace, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakeMounter } from '../volumes/mounter.ts';
import { Kubelet } from './kubelet.ts';
import { host, testKubeletOptions, untilOnClock } from './testing.ts';

const options = await testKubeletOptions();
after(() => rm(options.rootDir, { recursive: true, force: true }));

describe('Kubelet container set-up (fake API server and fake runtime)', () => {
  test('volumes, environment, /etc/hosts, termination log and postStart reach CRI', async () => {
    const clock = new FakeClock();
    const kube = new FakeKubeClient({ clock });
    const cri = new FakeCriClient({ flavor: 'containerd2', clock });
    cri.addImage('berth.local/busybox:1', { preloaded: true });
    const kubelet = new Kubelet(options, {
      kube,
      cri,
      recorder: new MemoryEventRecorder(),
      clock,
      logger: new MemoryLogger(),
      host,
      mounter: new FakeMounter(),
      cgroups: new FakeCgroupManager(),
    });
    await kubelet.start();
    try {
      await kube.create(inNamespace(CONFIGMAPS, 'default'), {
        metadata: { name: 'cfg', namespace: 'default' },
        data: { 'app.conf': 'v1\n', COLOR: 'blue' },
      });
      const created = await kube.create<Pod>(inNamespace(PODS, 'default'), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'web', namespace: 'default' },
        spec: {
          nodeName: 'node-a',
          terminationGracePeriodSeconds: 1,
          volumes: [{ name: 'cfg', configMap: { name: 'cfg' } }],
          containers: [
            {
              name: 'main',
              image: 'berth.local/busybox:1',
              imagePullPolicy: 'IfNotPresent',
              command: ['echo', '$(GREETING)'],
              env: [
                { name: 'GREETING', value: 'hi $(COLOR)' },
                { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              ],
              envFrom: [{ configMapRef: { name: 'cfg' } }],
              volumeMounts: [{ name: 'cfg', mountPath: '/etc/app', readOnly: true }],
              lifecycle: { postStart: { exec: { command: ['touch', '/tmp/started'] } } },
            },
          ],
        },
      });
      const uid = created.metadata?.uid ?? '';
      await untilOnClock(clock, 'pod Running', async () => {
        const p = await kube.get<Pod>(inNamespace(PODS, 'default'), 'web');
        return p.status?.phase === 'Running' ? p : undefined;
      });
      const [req] = cri.callsTo('RuntimeService/CreateContainer') as api.CreateContainerRequest[];
      const config = req?.config;
      assert.ok(config !== undefined);
      const env = new Map(config.envs.map((e) => [e.key, Buffer.from(e.value).toString()]));
      assert.equal(env.get('GREETING'), 'hi blue');
      assert.equal(env.get('POD'), 'web');
      assert.equal(env.get('app.conf'), 'v1\n');
      assert.deepEqual(config.command, ['echo', 'hi blue']);
      const byPath = new Map(config.mounts.map((m) => [m.containerPath, m]));
      const volume = byPath.get('/etc/app');
      assert.equal(
        volume?.hostPath,
        `${options.rootDir}/pods/${uid}/volumes/kubernetes.io~configmap/cfg`,
      );
      assert.equal(volume.readonly, true);
      assert.equal(await readFile(`${volume.hostPath}/app.conf`, 'utf8'), 'v1\n');
      const hosts = byPath.get('/etc/hosts');
      assert.ok(hosts !== undefined);
      assert.match(await readFile(hosts.hostPath, 'utf8'), /# Kubernetes-managed hosts file/);
      const term = byPath.get('/dev/termination-log');
      assert.ok(term?.hostPath.startsWith(`${options.rootDir}/pods/${uid}/containers/main/`));
      const execs = cri.callsTo('RuntimeService/ExecSync') as api.ExecSyncRequest[];
      assert.ok(execs.some((e) => e.cmd.join(' ') === 'touch /tmp/started'));
    } finally {
      await kubelet.stop();
      cri.close();
      await kube.close();
    }
  });
});
