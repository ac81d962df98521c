/**
 * User namespaces (`hostUsers: false`, issue #30) and procMount on containerd 2.x. The
 * cluster's containerd has a second runtime handler, runc-userns, on runc 1.3 built from
 * its module (idmapped mounts), reached through a RuntimeClass; its default handler is
 * Debian's runc 1.1.5, which containerd reports without user namespace support.
 *
 * A pod on runc-userns sees a 65536-ID range of its own in /proc/self/uid_map (the one
 * berth recorded in its pod directory), runs as root inside, and uses its emptyDir,
 * configMap and projected volumes through idmapped mounts: what it writes lands on the
 * host as root, not as its range. Two pods get disjoint ranges; a restarted berth
 * recreates a container with the recorded range; procMount Unmasked leaves /proc
 * unmasked; a pod without a supporting handler is refused with upstream's event and
 * berth keeps running pods.
 */
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { USERNS_HANDLER } from '../harness/containerd.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getPod,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const RUNTIME_CLASS = 'userns';
const GREETING = 'hello from a configMap';

/** One line of /proc/self/uid_map or gid_map: inside, outside, length. */
function idMap(text: string): { inside: number; outside: number; length: number }[] {
  return text
    .trim()
    .split('\n')
    .map((l) => {
      const [inside, outside, length] = l.trim().split(/\s+/).map(Number);
      return { inside: inside ?? NaN, outside: outside ?? NaN, length: length ?? NaN };
    });
}

describe('user namespaces: hostUsers false and procMount on containerd 2.x', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  const kubectl = (args: string[]): Promise<string> => cluster.kubectl(['-n', 'default', ...args]);
  const exec = (pod: string, script: string): Promise<string> =>
    kubectl(['exec', pod, '--', 'sh', '-c', script]);

  /**
   * A busybox pod with an emptyDir, a configMap and a projected volume. Its container
   * exits 1 once /scratch/stop exists (removing it), so a test can make berth recreate it.
   */
  function usernsPod(name: string, spec: Partial<NonNullable<Pod['spec']>> = {}): Pod {
    const base = busyboxPod(cluster, name, berth.nodeName, {
      command: [
        'sh',
        '-c',
        'while [ ! -f /scratch/stop ]; do sleep 0.2; done; rm /scratch/stop; exit 1',
      ],
      grace: 1,
    });
    const container = base.spec?.containers[0] ?? { name: 'main' };
    return {
      ...base,
      spec: {
        ...base.spec,
        hostUsers: false,
        runtimeClassName: RUNTIME_CLASS,
        volumes: [
          { name: 'scratch', emptyDir: {} },
          { name: 'cfg', configMap: { name: 'userns-cfg' } },
          {
            name: 'proj',
            projected: {
              sources: [
                { configMap: { name: 'userns-cfg' } },
                {
                  downwardAPI: {
                    items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }],
                  },
                },
              ],
            },
          },
        ],
        ...spec,
        containers: [
          {
            ...container,
            volumeMounts: [
              { name: 'scratch', mountPath: '/scratch' },
              { name: 'cfg', mountPath: '/cfg' },
              { name: 'proj', mountPath: '/proj' },
            ],
            ...spec.containers?.[0],
          },
        ],
      },
    };
  }

  async function runningUid(name: string): Promise<string> {
    const pod = await waitForPod(cluster, 'default', name, 'running', isRunningAndReady, 120_000);
    return pod.metadata?.uid ?? '';
  }

  /** The range berth recorded for the pod, from its file in the pod directory. */
  async function recordedRange(uid: string): Promise<number> {
    const file = JSON.parse(await readFile(join(berth.dir, 'pods', uid, 'userns'), 'utf8')) as {
      uidMappings: { hostId: number; containerId: number; length: number }[];
    };
    assert.equal(file.uidMappings.length, 1);
    assert.equal(file.uidMappings[0]?.containerId, 0);
    assert.equal(file.uidMappings[0]?.length, 65536);
    return file.uidMappings[0]?.hostId ?? NaN;
  }

  const ranges = new Map<string, number>();

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2', usernsHandler: true });
    berth = await startBerth(cluster);
    await applyJson(cluster, {
      apiVersion: 'node.k8s.io/v1',
      kind: 'RuntimeClass',
      metadata: { name: RUNTIME_CLASS },
      handler: USERNS_HANDLER,
    });
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'userns-cfg', namespace: 'default' },
      data: { greeting: GREETING },
    });
  });
  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('containerd reports user namespace support for runc-userns only', async () => {
    const client = new GrpcCriClient(cluster.runtime.socket, { defaultTimeoutMs: 10_000 });
    try {
      const { runtimeHandlers } = await client.runtime.status({ verbose: false });
      const support = Object.fromEntries(
        runtimeHandlers.map((h) => [h.name, h.features?.userNamespaces]),
      );
      assert.deepEqual(support, { '': false, runc: false, [USERNS_HANDLER]: true });
    } finally {
      client.close();
    }
  });

  test('a hostUsers false pod sees its own range in uid_map and gid_map, and is root in it', async () => {
    await applyJson(cluster, usernsPod('userns-a'));
    const uid = await runningUid('userns-a');
    const hostId = await recordedRange(uid);
    assert.ok(hostId >= 65536 && hostId % 65536 === 0, `range starts at ${hostId}`);
    assert.deepEqual(idMap(await exec('userns-a', 'cat /proc/self/uid_map')), [
      { inside: 0, outside: hostId, length: 65536 },
    ]);
    assert.deepEqual(idMap(await exec('userns-a', 'cat /proc/self/gid_map')), [
      { inside: 0, outside: hostId, length: 65536 },
    ]);
    assert.equal((await exec('userns-a', 'id -u')).trim(), '0');
    ranges.set('userns-a', hostId);
  });

  test('its volumes work through idmapped mounts: root inside writes as root on the host', async () => {
    const out = await exec(
      'userns-a',
      'echo written > /scratch/f && cat /scratch/f && stat -c %u:%g /scratch/f',
    );
    assert.deepEqual(out.trim().split('\n'), ['written', '0:0']);
    const uid = (await getPod(cluster, 'default', 'userns-a'))?.metadata?.uid ?? '';
    const onHost = await stat(
      join(berth.dir, 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', 'scratch', 'f'),
    );
    assert.deepEqual([onHost.uid, onHost.gid], [0, 0], 'not the range the pod runs as');
    assert.equal((await exec('userns-a', 'cat /cfg/greeting')).trim(), GREETING);
    assert.equal((await exec('userns-a', 'stat -c %u /cfg/greeting')).trim(), '0');
    await assert.rejects(exec('userns-a', 'echo x > /cfg/greeting'), /Read-only file system/);
    assert.deepEqual(
      (await exec('userns-a', 'cat /proj/greeting; echo; cat /proj/name')).trim().split('\n'),
      [GREETING, 'userns-a'],
    );
  });

  test('a second pod gets a disjoint range; procMount Unmasked leaves /proc unmasked', async () => {
    await applyJson(
      cluster,
      usernsPod('userns-b', {
        containers: [{ name: 'main', securityContext: { procMount: 'Unmasked' } }],
      }),
    );
    const uid = await runningUid('userns-b');
    const hostId = await recordedRange(uid);
    assert.notEqual(hostId, ranges.get('userns-a'));
    assert.deepEqual(idMap(await exec('userns-b', 'cat /proc/self/uid_map')), [
      { inside: 0, outside: hostId, length: 65536 },
    ]);
    ranges.set('userns-b', hostId);
    // Masked paths are /dev/null (or an empty tmpfs) mounted over /proc entries that exist
    // (this kernel has no /proc/kcore), read-only paths are read-only bind mounts: the
    // default pod has both, the unmasked pod neither.
    const procMounts = (pod: string) =>
      exec(pod, "awk '$2 ~ /^\\/proc\\/./ {print $2, substr($4, 1, 2)}' /proc/mounts");
    const masked = await procMounts('userns-a');
    assert.match(masked, /^\/proc\/timer_list /m);
    assert.match(masked, /^\/proc\/sys ro$/m);
    assert.equal((await procMounts('userns-b')).trim(), '');
    // Unmasked is still the pod's /proc: the host's own sysctls belong to an ID outside
    // its range (nobody), so its root reads them and cannot change them.
    assert.match(await exec('userns-b', 'cat /proc/sys/kernel/panic'), /^\d+\s*$/);
    await assert.rejects(exec('userns-b', 'echo 0 > /proc/sys/kernel/panic'), /denied/i);
  });

  test('a restarted berth recreates a container with the recorded range', async () => {
    berth = await berth.restart();
    // The new process serves exec once it is up.
    await eventually('berth serving exec again', () =>
      exec('userns-a', 'touch /scratch/stop').then(() => true),
    );
    const pod = await waitForPod(
      cluster,
      'default',
      'userns-a',
      'its container restarted and running',
      (p) => isRunningAndReady(p) && (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1,
      120_000,
    );
    assert.equal(await recordedRange(pod.metadata?.uid ?? ''), ranges.get('userns-a'));
    assert.deepEqual(idMap(await exec('userns-a', 'cat /proc/self/uid_map')), [
      { inside: 0, outside: ranges.get('userns-a') ?? NaN, length: 65536 },
    ]);
    assert.equal((await exec('userns-a', 'cat /scratch/f')).trim(), 'written');
  });

  test("the default handler (Debian's runc) is refused with upstream's event; berth keeps running", async () => {
    const onDefault = usernsPod('userns-refused');
    delete onDefault.spec?.runtimeClassName;
    await applyJson(cluster, onDefault);
    const event = await eventually('the refusal event', async () =>
      (await podEvents(cluster, 'default', 'userns-refused')).find(
        (e) => e.reason === 'FailedCreatePodSandBox',
      ),
    );
    assert.equal(
      event.message,
      "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces",
    );
    assert.equal(event.type, 'Warning');
    const refused = await getPod(cluster, 'default', 'userns-refused');
    assert.equal(refused?.status?.containerStatuses?.[0]?.state?.running, undefined);
    // Still running pods: a plain one starts, the userns pods keep going.
    await applyJson(cluster, busyboxPod(cluster, 'plain', berth.nodeName, { grace: 1 }));
    await waitForPod(cluster, 'default', 'plain', 'running', isRunningAndReady, 120_000);
    assert.ok(isRunningAndReady((await getPod(cluster, 'default', 'userns-b')) ?? {}));
  });

  test("a deleted pod's recorded range goes with its directory", async () => {
    const uid = (await getPod(cluster, 'default', 'userns-b'))?.metadata?.uid ?? '';
    await kubectl(['delete', 'pod', 'userns-b', '--wait=true', '--timeout=120s']);
    await eventually('the pod directory removed', async () => {
      try {
        await stat(join(berth.dir, 'pods', uid));
        return undefined;
      } catch {
        return true;
      }
    });
  });
});
