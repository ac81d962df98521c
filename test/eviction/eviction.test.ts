/**
 * Node-pressure eviction on a berth node (issue #28) with real memory and PID pressure,
 * sized so the host is never at risk. Both signals are host-wide, and other work on the
 * machine moves them (memory.available by gigabytes as page cache turns active), so
 * each scenario arms its threshold just before it makes the pressure: its pods run
 * first, then berth restarts with the threshold relative to what is available at that
 * moment (memory: 2 GiB below; pids: 1500 below), and the node must stay without
 * pressure for two monitoring periods, else the threshold is measured again. The
 * pressure then goes 1.5 GiB (or 1000 processes) past it: a pod holding memory (busybox
 * tails buffering lines with no end; refused if the host would keep less than 15 GiB
 * available) or forking sleeps (bounded by count and by time, each sleep ending by itself).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Node } from 'kubernetes-types/core/v1.js';
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
import {
  Gi,
  MARK,
  Mi,
  condition,
  evictionLog,
  meminfo,
  memoryAvailable,
  miText,
  pidAvailable,
  restartWith,
  waitCondition,
  withResources,
} from './pressure.ts';

const MONITORING_PERIOD_MS = 10_000;

/**
 * A shell command holding about `bytes` of memory: busybox tail buffering lines that
 * never end, 512 MiB per tail (one tail past 2 GiB overflows and lets go).
 */
function hogCommand(bytes: number): string {
  const chunks = Math.ceil(bytes / (512 * Mi));
  const one = `(head -c ${512 * Mi} /dev/zero; sleep 3600) | tail`;
  return `i=0; while [ $i -lt ${chunks} ]; do ${one} & i=$((i+1)); done; wait`;
}

/**
 * Forks up to `count` sleeps, and stops forking after `seconds` whatever the count;
 * every sleep ends by itself after 10 minutes.
 */
function forkCommand(count: number, seconds: number): string {
  return [
    `end=$(( $(date +%s) + ${seconds} )); i=0`,
    `while [ $i -lt ${count} ] && [ $(date +%s) -lt $end ]; do`,
    '  j=0; while [ $j -lt 100 ]; do sleep 600 & j=$((j+1)); done; i=$((i+100))',
    'done; wait',
  ].join('\n');
}

describe('node-pressure eviction on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  const getNode = (): Promise<Node | undefined> => getJson<Node>(cluster, ['get', 'node', node]);

  /**
   * Restarts berth with `thresholds` (evictionHard lines) made by `measure` from what is
   * available now, until the node has gone two monitoring periods without `type`
   * pressure under them. Returns the last measure's result.
   */
  async function arm<T extends { readonly lines: readonly string[] }>(
    type: string,
    measure: () => Promise<T>,
  ): Promise<T> {
    let last = '';
    for (let attempt = 0; attempt < 3; attempt++) {
      const armed = await measure();
      berth = await restartWith(berth, armed.lines);
      await waitCondition(cluster, node, 'Ready', 'True', 60_000);
      await new Promise((resolve) => setTimeout(resolve, 2 * MONITORING_PERIOD_MS + 3000));
      if (condition(await getNode(), type) === 'False') return armed;
      last = `${armed.lines.join(' ')}: ${await evictionLog(berth.logFile, 5)}`;
    }
    throw new Error(
      `the host kept moving past the threshold, ${type} before any pressure: ${last}`,
    );
  }

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster, {
      extraConfig: ['evictionPressureTransitionPeriod: 30s', 'nodeStatusUpdateFrequency: 2s', MARK],
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

    const { threshold } = await arm('MemoryPressure', async () => {
      const threshold = miText(Math.floor(((await memoryAvailable()) - 2 * Gi) / Mi));
      return { threshold, lines: ['evictionHard:', `  memory.available: "${threshold}"`] };
    });
    // Sized now, as other processes on the host come and go: 1.5 GiB past the threshold.
    const thresholdBytes = Number.parseInt(threshold, 10) * Mi;
    const hogBytes = Math.ceil(((await memoryAvailable()) - thresholdBytes + 1.5 * Gi) / Mi) * Mi;
    const kernelAvailable = (await meminfo('MemAvailable')) - hogBytes;
    assert.ok(
      kernelAvailable > 15 * Gi,
      `a ${hogBytes}-byte pod would leave the host ${kernelAvailable} bytes: not running it`,
    );
    await applyJson(
      cluster,
      busyboxPod(cluster, 'hog', node, { command: ['sh', '-c', hogCommand(hogBytes)] }),
    );
    const pressured = await waitCondition(cluster, node, 'MemoryPressure', 'True', 60_000).catch(
      async (err: unknown) => {
        throw new Error(
          `${String(err)}; memory.available now ${await memoryAvailable()}, threshold ${threshold}; berth: ${await evictionLog(berth.logFile, 10)}`,
        );
      },
    );
    const cond = pressured.status?.conditions?.find((c) => c.type === 'MemoryPressure');
    assert.equal(cond?.reason, 'KubeletHasInsufficientMemory');
    assert.equal(cond?.message, 'kubelet has insufficient memory available');

    // While the node reports MemoryPressure, a new BestEffort pod is refused.
    await applyJson(cluster, busyboxPod(cluster, 'late-besteffort', node));

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
    assert.match(
      message,
      new RegExp(
        `^The node was low on resource: memory\\. Threshold quantity: ${threshold}, available: \\d+(Ki|Mi)?\\. ` +
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
    const cleared = await waitCondition(cluster, node, 'MemoryPressure', 'False', 90_000);
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
    const { threshold } = await arm('PIDPressure', async () => {
      const pids = (await pidAvailable()) - 1500;
      // Go prints 31000 as 31k: keep the number as written.
      const threshold = pids % 1000 === 0 ? pids - 1 : pids;
      return { threshold, lines: ['evictionHard:', `  pid.available: "${threshold}"`] };
    });
    // 1000 past the threshold as measured now, 300 s of forking at most.
    const count = Math.ceil(((await pidAvailable()) - threshold + 1000) / 100) * 100;
    assert.ok(count <= 5000, `${count} processes to cross the threshold: the host moved too much`);
    await applyJson(
      cluster,
      busyboxPod(cluster, 'forker', node, { command: ['sh', '-c', forkCommand(count, 300)] }),
    );
    const pressured = await waitCondition(cluster, node, 'PIDPressure', 'True', 120_000).catch(
      async (err: unknown) => {
        throw new Error(
          `${String(err)}; pid.available now ${await pidAvailable()}, threshold ${threshold}; berth: ${await evictionLog(berth.logFile, 10)}`,
        );
      },
    );
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
        `^The node was low on resource: pids\\. Threshold quantity: ${threshold}, available: \\d+k?\\. $`,
      ),
    );
    const quiet = await waitForPod(cluster, 'default', 'quiet', 'Running', isRunningAndReady);
    assert.equal(quiet.status?.phase, 'Running');
    await waitCondition(cluster, node, 'PIDPressure', 'False', 90_000);
  });
});
