/**
 * Node-pressure eviction on a berth node (issue #28), with real pressure sized so the
 * host is never at risk: the thresholds are set relative to what the host has when the
 * test starts (memory.available = available now minus 1.5 GiB; pid.available =
 * available now minus 1500), and a pod then takes 1.5 GiB more than what is above the
 * threshold when it starts (busybox tails buffering lines with no end; refused if the
 * host would keep less than 15 GiB available) or forks 2500 sleeping processes (bounded by count, and
 * each sleep ends by itself). The host keeps well over 15 GiB available throughout.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const Mi = 2 ** 20;
const run = promisify(execFile);

/** One /proc/meminfo field, in bytes. */
async function meminfo(key: string): Promise<number> {
  const text = await readFile('/proc/meminfo', 'utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${key}:`));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

/** memory.available as berth (and cAdvisor) measure it: MemFree + Inactive(file). */
async function memoryAvailable(): Promise<number> {
  return (await meminfo('MemFree')) + (await meminfo('Inactive(file)'));
}

/**
 * A shell command holding about `bytes` of memory: busybox tail buffering lines that
 * never end, 512 MiB per tail (one tail past 2 GiB overflows and lets go).
 */
function hogCommand(bytes: number): string {
  const chunks = Math.ceil(bytes / (512 * Mi));
  const one = `(head -c ${512 * Mi} /dev/zero; sleep 3600) | tail`;
  return `i=0; while [ $i -lt ${chunks} ]; do ${one} & i=$((i+1)); done; wait`;
}

/** pid.available as berth measures it: pid_max minus the tasks now. */
async function pidAvailable(): Promise<number> {
  const max = Number((await readFile('/proc/sys/kernel/pid_max', 'utf8')).trim());
  const tasks = Number(/\d+\/(\d+)/.exec(await readFile('/proc/loadavg', 'utf8'))?.[1] ?? 0);
  return max - tasks;
}

function withResources(pod: Pod, resources: Record<string, Record<string, string>>): Pod {
  const [c] = pod.spec?.containers ?? [];
  if (c !== undefined) c.resources = resources;
  return pod;
}

const condition = (node: Node | undefined, type: string): string | undefined =>
  node?.status?.conditions?.find((c) => c.type === type)?.status;

describe('node-pressure eviction on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;
  let memoryThreshold: string;
  let pidThreshold: number;

  const getNode = (): Promise<Node | undefined> => getJson<Node>(cluster, ['get', 'node', node]);
  const waitCondition = (type: string, status: string, timeoutMs: number): Promise<Node> =>
    eventually(
      `node ${type}=${status}`,
      async () => {
        const n = await getNode();
        return condition(n, type) === status ? n : undefined;
      },
      timeoutMs,
    );

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    // Values Go would not print with a larger unit (17408Mi prints as 17Gi, 31000 as 31k).
    const mi = Math.floor(((await memoryAvailable()) - 1.5 * 2 ** 30) / Mi);
    memoryThreshold = `${mi % 1024 === 0 ? mi - 1 : mi}Mi`;
    const pids = (await pidAvailable()) - 1500;
    pidThreshold = pids % 1000 === 0 ? pids - 1 : pids;
    berth = await startBerth(cluster, {
      extraConfig: [
        'evictionHard:',
        `  memory.available: "${memoryThreshold}"`,
        `  pid.available: "${pidThreshold}"`,
        'evictionPressureTransitionPeriod: 30s',
        'nodeStatusUpdateFrequency: 2s',
      ],
    });
    node = berth.nodeName;
  });

  after(async () => {
    await cluster
      .kubectl(['delete', 'pods', '--all', '--grace-period=0', '--force'])
      .catch(() => '');
    await eventually(
      'every pod gone',
      async () => {
        const out = await cluster.kubectl(['get', 'pods', '-o', 'name']);
        return out.trim() === '' ? true : undefined;
      },
      60_000,
    ).catch(() => undefined);
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('memory: the pod using most above its request is evicted, Guaranteed untouched, BestEffort refused', async () => {
    const guaranteed = withResources(busyboxPod(cluster, 'guaranteed', node), {
      requests: { cpu: '50m', memory: '64Mi' },
      limits: { cpu: '50m', memory: '64Mi' },
    });
    const burstable = withResources(
      busyboxPod(cluster, 'burstable', node, {
        command: ['sh', '-c', '(head -c 33554432 /dev/zero; sleep 3600) | tail'],
      }),
      { requests: { memory: '16Mi' } },
    );
    const bestEffort = busyboxPod(cluster, 'besteffort', node);
    for (const p of [guaranteed, burstable, bestEffort]) await applyJson(cluster, p);
    for (const name of ['guaranteed', 'burstable', 'besteffort'])
      await waitForPod(cluster, 'default', name, 'Running', isRunningAndReady);
    assert.equal(condition(await getNode(), 'MemoryPressure'), 'False');

    // Sized now, as other processes on the host come and go: 1.5 GiB past the threshold.
    const thresholdBytes = Number.parseInt(memoryThreshold, 10) * Mi;
    const hogBytes =
      Math.ceil(((await memoryAvailable()) - thresholdBytes + 1.5 * 2 ** 30) / Mi) * Mi;
    const kernelAvailable = (await meminfo('MemAvailable')) - hogBytes;
    assert.ok(
      kernelAvailable > 15 * 2 ** 30,
      `a ${hogBytes}-byte pod would leave the host ${kernelAvailable} bytes: not running it`,
    );
    await applyJson(
      cluster,
      busyboxPod(cluster, 'hog', node, {
        command: ['sh', '-c', hogCommand(hogBytes)],
      }),
    );
    const pressured = await waitCondition('MemoryPressure', 'True', 60_000).catch(
      async (err: unknown) => {
        const log = await readFile(berth.logFile, 'utf8').catch(() => '');
        const lines = log.split('\n').filter((l) => /eviction|Eviction/.test(l));
        throw new Error(
          `${String(err)}; memory.available now ${await memoryAvailable()}, threshold ${memoryThreshold}; berth: ${lines.slice(-10).join('\n')}`,
        );
      },
    );
    const cond = pressured.status?.conditions?.find((c) => c.type === 'MemoryPressure');
    assert.equal(cond?.reason, 'KubeletHasInsufficientMemory');
    assert.equal(cond?.message, 'kubelet has insufficient memory available');

    const evicted = await waitForPod(
      cluster,
      'default',
      'hog',
      'evicted',
      (p) => p.status?.phase === 'Failed',
      60_000,
    );
    assert.equal(evicted.status?.reason, 'Evicted');
    const message = evicted.status?.message ?? '';
    const escaped = memoryThreshold.replace(/[.]/g, '\\.');
    assert.match(
      message,
      new RegExp(
        `^The node was low on resource: memory\\. Threshold quantity: ${escaped}, available: \\d+(Ki|Mi)?\\. ` +
          `Container main was using \\d+(Ki|Mi|Gi)?, request is 0, has larger consumption of memory\\. $`,
      ),
    );
    const disruption = evicted.status?.conditions?.find((c) => c.type === 'DisruptionTarget');
    assert.equal(disruption?.status, 'True');
    assert.equal(disruption?.reason, 'TerminationByKubelet');
    assert.equal(disruption?.message, message);
    const events = await podEvents(cluster, 'default', 'hog');
    assert.ok(
      events.some((e) => e.reason === 'Evicted' && e.type === 'Warning' && e.message === message),
      `an Evicted event, got ${JSON.stringify(events)}`,
    );

    // Still within the transition period: a new BestEffort pod is refused.
    await applyJson(cluster, busyboxPod(cluster, 'late-besteffort', node));
    const refused = await waitForPod(
      cluster,
      'default',
      'late-besteffort',
      'rejected',
      (p) => p.status?.phase === 'Failed',
    );
    assert.equal(refused.status?.reason, 'Evicted');
    assert.equal(
      refused.status?.message,
      'Pod was rejected: The node had condition: [MemoryPressure]. ',
    );

    // Pressure clears once the transition period has passed without a threshold met.
    const cleared = await waitCondition('MemoryPressure', 'False', 90_000);
    assert.equal(
      cleared.status?.conditions?.find((c) => c.type === 'MemoryPressure')?.reason,
      'KubeletHasSufficientMemory',
    );
    const g = await waitForPod(cluster, 'default', 'guaranteed', 'Running', isRunningAndReady);
    assert.equal(g.status?.containerStatuses?.[0]?.restartCount, 0);
    for (const name of ['burstable', 'besteffort'])
      assert.equal(
        (await waitForPod(cluster, 'default', name, 'Running', isRunningAndReady)).status?.phase,
        'Running',
      );
  });

  test('PID: a pod forking past pid.available trips PIDPressure and is evicted', async () => {
    await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']);
    await applyJson(cluster, busyboxPod(cluster, 'quiet', node));
    await waitForPod(cluster, 'default', 'quiet', 'Running', isRunningAndReady);
    // 2500 sleeps at most; each ends after 10 minutes even if nothing kills it.
    await applyJson(
      cluster,
      busyboxPod(cluster, 'forker', node, {
        command: ['sh', '-c', 'i=0; while [ $i -lt 2500 ]; do sleep 600 & i=$((i+1)); done; wait'],
      }),
    );
    const pressured = await waitCondition('PIDPressure', 'True', 90_000);
    assert.equal(
      pressured.status?.conditions?.find((c) => c.type === 'PIDPressure')?.reason,
      'KubeletHasInsufficientPID',
    );
    const evicted = await waitForPod(
      cluster,
      'default',
      'forker',
      'evicted',
      (p) => p.status?.phase === 'Failed',
      60_000,
    );
    assert.equal(evicted.status?.reason, 'Evicted');
    assert.match(
      evicted.status?.message ?? '',
      new RegExp(
        `^The node was low on resource: pids\\. Threshold quantity: ${pidThreshold}, available: \\d+k?\\. $`,
      ),
    );
    const quiet = await waitForPod(cluster, 'default', 'quiet', 'Running', isRunningAndReady);
    assert.equal(quiet.status?.phase, 'Running');
    await waitCondition('PIDPressure', 'False', 90_000);
  });

  test('ephemeral storage: a container over its limit is evicted while the node has no pressure', async () => {
    await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']);
    // Two containers, so the pod's total limit (1034Mi) holds and the container's (10Mi) is
    // the one crossed: upstream checks the pod total first.
    const scribbler = busyboxPod(cluster, 'scribbler', node, {
      containers: [
        {
          name: 'main',
          command: ['sh', '-c', 'dd if=/dev/zero of=/fill bs=1M count=24; sleep 3600'],
        },
        { name: 'idle', command: ['sleep', '3600'] },
      ],
    });
    const [main, idle] = scribbler.spec?.containers ?? [];
    if (main !== undefined) main.resources = { limits: { 'ephemeral-storage': '10Mi' } };
    if (idle !== undefined) idle.resources = { limits: { 'ephemeral-storage': '1Gi' } };
    await applyJson(cluster, scribbler);
    const evicted = await waitForPod(
      cluster,
      'default',
      'scribbler',
      'evicted',
      (p) => p.status?.phase === 'Failed',
      90_000,
    );
    assert.equal(evicted.status?.reason, 'Evicted');
    assert.equal(
      evicted.status?.message,
      'Container main exceeded its local ephemeral storage limit "10Mi". ',
    );
    assert.equal(condition(await getNode(), 'DiskPressure'), 'False');
  });

  test('disk: a pod filling a small nodefs trips DiskPressure, is evicted, new pods are refused', async () => {
    await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']);
    await berth.stop();
    // berth's root directory on a 512 MiB ext4 image: the pod fills that, never the host.
    const dir = await mkdtemp(join(tmpdir(), 'berth-nodefs-'));
    const image = join(dir, 'nodefs.img');
    const mnt = join(dir, 'mnt');
    await mkdir(mnt);
    await run('truncate', ['-s', '512M', image]);
    await run('mkfs.ext4', ['-q', '-F', image]);
    await run('mount', ['-o', 'loop', image, mnt]);
    let disk: BerthNode | undefined;
    try {
      disk = await startBerth(cluster, {
        extraArgs: ['--root-dir', join(mnt, 'root')],
        extraConfig: [
          'evictionHard:',
          '  nodefs.available: "40%"',
          'evictionPressureTransitionPeriod: 30s',
          'nodeStatusUpdateFrequency: 2s',
        ],
      });
      const diskNode = disk.nodeName;
      const getDiskNode = (): Promise<Node | undefined> =>
        getJson<Node>(cluster, ['get', 'node', diskNode]);
      const diskCondition = (status: string, timeoutMs: number): Promise<Node> =>
        eventually(
          `node DiskPressure=${status}`,
          async () => {
            const n = await getDiskNode();
            return condition(n, 'DiskPressure') === status ? n : undefined;
          },
          timeoutMs,
        );
      await diskCondition('False', 60_000);
      const filler = busyboxPod(cluster, 'filler', diskNode, {
        command: ['sh', '-c', 'dd if=/dev/zero of=/data/fill bs=1M count=300; sleep 3600'],
        extraSpec: { volumes: [{ name: 'data', emptyDir: {} }] },
      });
      const [c] = filler.spec?.containers ?? [];
      if (c !== undefined) c.volumeMounts = [{ name: 'data', mountPath: '/data' }];
      await applyJson(cluster, filler);
      const pressured = await diskCondition('True', 90_000);
      const cond = pressured.status?.conditions?.find((x) => x.type === 'DiskPressure');
      assert.equal(cond?.reason, 'KubeletHasDiskPressure');
      assert.equal(cond?.message, 'kubelet has disk pressure');
      const evicted = await waitForPod(
        cluster,
        'default',
        'filler',
        'evicted',
        (p) => p.status?.phase === 'Failed',
        60_000,
      );
      assert.equal(evicted.status?.reason, 'Evicted');
      assert.match(
        evicted.status?.message ?? '',
        /^The node was low on resource: ephemeral-storage\. Threshold quantity: \d+(Ki|Mi)?, available: \d+(Ki|Mi)?\. /,
      );
      const disruption = evicted.status?.conditions?.find((x) => x.type === 'DisruptionTarget');
      assert.equal(disruption?.reason, 'TerminationByKubelet');
      await applyJson(
        cluster,
        withResources(busyboxPod(cluster, 'late-burstable', diskNode), {
          requests: { memory: '8Mi' },
        }),
      );
      const refused = await waitForPod(
        cluster,
        'default',
        'late-burstable',
        'rejected',
        (p) => p.status?.phase === 'Failed',
      );
      assert.equal(
        refused.status?.message,
        'Pod was rejected: The node had condition: [DiskPressure]. ',
      );
      // Deleting the evicted pod frees its emptyDir: the pressure clears after the transition period.
      await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']);
      await diskCondition('False', 90_000);
    } finally {
      await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']).catch(() => '');
      await disk?.stop();
      await run('umount', [mnt]).catch(() => run('umount', ['-l', mnt]));
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('soft threshold: no eviction before its grace period, eviction after', async () => {
    await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']).catch(() => '');
    await berth.stop();
    const mi = Math.floor(((await memoryAvailable()) - 1.5 * 2 ** 30) / Mi);
    const softThreshold = `${mi % 1024 === 0 ? mi - 1 : mi}Mi`;
    const soft = await startBerth(cluster, {
      extraConfig: [
        'evictionSoft:',
        `  memory.available: "${softThreshold}"`,
        'evictionSoftGracePeriod:',
        '  memory.available: 30s',
        'evictionMaxPodGracePeriod: 5',
        'evictionPressureTransitionPeriod: 30s',
        'nodeStatusUpdateFrequency: 2s',
      ],
    });
    try {
      const softNode = soft.nodeName;
      const memoryPressure = (status: string, timeoutMs: number): Promise<Node> =>
        eventually(
          `node MemoryPressure=${status}`,
          async () => {
            const n = await getJson<Node>(cluster, ['get', 'node', softNode]);
            return condition(n, 'MemoryPressure') === status ? n : undefined;
          },
          timeoutMs,
        );
      await memoryPressure('False', 60_000);
      const thresholdBytes = Number.parseInt(softThreshold, 10) * Mi;
      const hogBytes =
        Math.ceil(((await memoryAvailable()) - thresholdBytes + 2.5 * 2 ** 30) / Mi) * Mi;
      assert.ok((await meminfo('MemAvailable')) - hogBytes > 15 * 2 ** 30);
      await applyJson(
        cluster,
        busyboxPod(cluster, 'soft-hog', softNode, {
          command: ['sh', '-c', hogCommand(hogBytes)],
        }),
      );
      await memoryPressure('True', 60_000);
      const seen = Date.now();
      // Pressure is reported, but the grace period (30 s from the first observation) runs.
      await new Promise((resolve) => setTimeout(resolve, 15_000));
      const waiting = await getJson<Pod>(cluster, ['get', 'pod', 'soft-hog']);
      assert.equal(waiting?.status?.phase, 'Running', 'not evicted within the grace period');
      const evicted = await waitForPod(
        cluster,
        'default',
        'soft-hog',
        'evicted after the grace period',
        (p) => p.status?.phase === 'Failed',
        60_000,
      ).catch(async (err: unknown) => {
        const log = await readFile(soft.logFile, 'utf8').catch(() => '');
        const lines = log.split('\n').filter((l) => /viction/.test(l));
        throw new Error(
          `${String(err)}; ${Math.round((Date.now() - seen) / 1000)}s after pressure; memory.available ${await memoryAvailable()}; berth: ${lines.slice(-15).join('\n')}`,
        );
      });
      assert.equal(evicted.status?.reason, 'Evicted');
      assert.match(
        evicted.status?.message ?? '',
        new RegExp(
          `^The node was low on resource: memory\\. Threshold quantity: ${softThreshold}, `,
        ),
      );
    } finally {
      await cluster.kubectl(['delete', 'pods', '--all', '--wait=true']).catch(() => '');
      await soft.stop();
    }
  });
});
