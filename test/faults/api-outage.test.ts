/**
 * API server faults (issue #32, items 2 and 3):
 * - kube-apiserver stopped for FAULTS_OUTAGE_SECONDS (default 120) with pods running,
 *   some crash-looping and one killed by its liveness probe: the pods keep running, the
 *   probes and restarts go on meanwhile, and once the API returns every pod's status
 *   there equals the runtime's within 20 s, the Lease renews, no pod is killed as an
 *   orphan;
 * - behind a fault proxy the test owns (proxy.ts), windows of 429, 500 and hung
 *   requests: berth backs off (its CPU over each window and the requests it made are
 *   recorded and bounded), then recovers: a pod bound during the window runs;
 * - watches answered "too old resource version" (410): the reflectors relist, at a
 *   bounded rate, and nothing the API still binds to the node is killed.
 * FAULTS_AGENT=upstream runs all of it against the upstream kubelet (its --kubeconfig
 * names the proxy as berth's does).
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  probedPod,
} from '../harness/kube-helpers.ts';
import { createNodeIdentity } from '../harness/node-identity.ts';
import { waitFor } from '../harness/process.ts';
import {
  agentKind,
  agentNodeName,
  leaseRenewedAfter,
  containerIdentity,
  nodeReady,
  podsOnNode,
  startAgent,
  type NodeAgent,
} from './agent.ts';
import { recordFigures, sizeFlag } from './figures.ts';
import { startFaultProxy, type FaultMode, type FaultProxy } from './proxy.ts';
import { cpuSeconds, Restartable } from './restartable.ts';

const AGENT = agentKind();
const OUTAGE_SECONDS = sizeFlag('OUTAGE_SECONDS', 120);
const WINDOW_SECONDS = sizeFlag('WINDOW_SECONDS', 30);
const STEADY = sizeFlag('PODS', 8);

/** The runtime's latest container per pod uid and container name, with its restart count. */
async function runtimeView(
  socket: string,
): Promise<Map<string, { id: string; restartCount: number; createdAt: bigint }>> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 15_000 });
  try {
    const { containers } = await client.runtime.listContainers({});
    const latest = new Map<string, { id: string; restartCount: number; createdAt: bigint }>();
    for (const c of containers) {
      const key = `${c.labels['io.kubernetes.pod.uid'] ?? ''}/${c.metadata?.name ?? ''}`;
      const have = latest.get(key);
      if (have !== undefined && have.createdAt > c.createdAt) continue;
      latest.set(key, {
        id: c.id,
        restartCount: Number(c.annotations['io.kubernetes.container.restartCount'] ?? '0'),
        createdAt: c.createdAt,
      });
    }
    return latest;
  } finally {
    client.close();
  }
}

/** Containers the runtime created in [fromMs, toMs), per pod name. */
async function createdBetween(
  socket: string,
  fromMs: number,
  toMs: number,
): Promise<Map<string, number>> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 15_000 });
  try {
    const { containers } = await client.runtime.listContainers({});
    const out = new Map<string, number>();
    for (const c of containers) {
      const ms = Number(c.createdAt / 1_000_000n);
      if (ms < fromMs || ms >= toMs) continue;
      const pod = c.labels['io.kubernetes.pod.name'] ?? '';
      out.set(pod, (out.get(pod) ?? 0) + 1);
    }
    return out;
  } finally {
    client.close();
  }
}

/** Pods whose API container statuses differ from the runtime's latest containers. */
async function statusMismatches(cluster: Cluster, node: string): Promise<string[]> {
  const [pods, rt] = await Promise.all([
    podsOnNode(cluster, node),
    runtimeView(cluster.runtime.socket),
  ]);
  const out: string[] = [];
  for (const pod of pods) {
    for (const c of pod.status?.containerStatuses ?? []) {
      const have = rt.get(`${pod.metadata?.uid ?? ''}/${c.name}`);
      const want = have === undefined ? 'none' : `containerd://${have.id}#${have.restartCount}`;
      const got = `${c.containerID ?? 'none'}#${c.restartCount}`;
      if (have === undefined ? c.containerID !== undefined : got !== want)
        out.push(`${pod.metadata?.name ?? ''}/${c.name}: API ${got}, runtime ${want}`);
    }
  }
  return out;
}

async function apiserverReady(cluster: Cluster): Promise<void> {
  await waitFor(
    'kube-apiserver /readyz',
    async () => (await cluster.kubectl(['get', '--raw', '/readyz'])).trim() === 'ok',
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

/** The request kind the proxy faulted most during a window, as "GET /path x<count>". */
function busiest(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): string {
  let top = ['none', 0] as [string, number];
  for (const [kind, n] of after) {
    const d = n - (before.get(kind) ?? 0);
    if (d > top[1]) top = [kind, d];
  }
  return `${top[0]} x${top[1]}`;
}

const steady = (cluster: Cluster, node: string, i: number): Pod => {
  const pod = probedPod(cluster, `steady-${i}`, node, ['sleep', '3600'], {
    readinessProbe: { exec: { command: ['true'] }, periodSeconds: 5 },
  });
  return { ...pod, metadata: { ...pod.metadata, labels: { fault: 'steady' } } };
};

describe(`API server faults (${AGENT})`, () => {
  let cluster: Cluster;
  let agent: NodeAgent;
  let proxy: FaultProxy | undefined;
  let node: string;
  const baseline = new Map<string, string>();

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    // The agent talks to the apiserver through the fault proxy (passing by default).
    const identity = await createNodeIdentity(cluster, agentNodeName(cluster, AGENT));
    proxy = await startFaultProxy({
      upstream: cluster.controlPlane.server,
      caFile: cluster.pki.ca.cert,
      servingCert: cluster.pki.apiserver,
      clientCert: identity.clientCert,
    });
    const kubeconfig = join(identity.dir, 'proxy.kubeconfig');
    const direct = await readFile(identity.kubeconfig, 'utf8');
    await writeFile(kubeconfig, direct.replace(cluster.controlPlane.server, proxy.url), {
      mode: 0o600,
    });
    agent = await startAgent(cluster, AGENT, { kubeconfig });
    node = agent.nodeName;
    await waitFor('the node Ready', async () => (await nodeReady(cluster, node)) === 'True', {
      timeoutMs: 90_000,
    });
    for (let i = 0; i < STEADY; i++) await applyJson(cluster, steady(cluster, node, i));
    await eventually(
      'the steady pods Running and Ready',
      async () => {
        const pods = (await podsOnNode(cluster, node)).filter(
          (p) => p.metadata?.labels?.['fault'] === 'steady',
        );
        if (pods.length !== STEADY || !pods.every(isRunningAndReady)) return undefined;
        for (const p of pods) baseline.set(p.metadata?.name ?? '', containerIdentity(p));
        return true;
      },
      180_000,
      2000,
    );
  });

  after(async () => {
    await agent.stop();
    await proxy?.close();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  /** The steady pods still run the containers they ran at the start. */
  async function steadyUnchanged(): Promise<string[]> {
    const pods = (await podsOnNode(cluster, node)).filter(
      (p) => p.metadata?.labels?.['fault'] === 'steady',
    );
    const out: string[] = [];
    for (const [name, identity] of baseline) {
      const pod = pods.find((p) => p.metadata?.name === name);
      if (pod === undefined) out.push(`${name}: gone`);
      else if (containerIdentity(pod) !== identity)
        out.push(`${name}: ${identity} -> ${containerIdentity(pod)}`);
    }
    return out;
  }

  test(`kube-apiserver stopped for ${OUTAGE_SECONDS} s`, async () => {
    for (let i = 0; i < 3; i++)
      await applyJson(cluster, {
        ...busyboxPod(cluster, `crasher-${i}`, node, { command: ['sh', '-c', 'sleep 3; exit 1'] }),
      });
    await applyJson(
      cluster,
      probedPod(
        cluster,
        'liveness',
        node,
        ['sh', '-c', 'touch /tmp/ok; sleep 20; rm /tmp/ok; sleep 3600'],
        {
          livenessProbe: {
            exec: { command: ['cat', '/tmp/ok'] },
            periodSeconds: 2,
            failureThreshold: 1,
          },
        },
      ),
    );
    await eventually(
      'the crashers and the liveness pod started',
      async () => {
        const pods = await podsOnNode(cluster, node);
        const started = pods.filter(
          (p) =>
            /^(crasher|liveness)/.test(p.metadata?.name ?? '') &&
            p.status?.containerStatuses?.[0]?.containerID !== undefined,
        );
        return started.length === 4 ? true : undefined;
      },
      120_000,
      1000,
    );
    const apiserver = new Restartable(
      cluster.controlPlane.processes.find((p) => p.name === 'kube-apiserver') ??
        assert.fail('no kube-apiserver'),
    );
    const cpuBefore = await cpuSeconds(agent.pid());
    await apiserver.stop();
    const downAt = Date.now();
    await sleep(OUTAGE_SECONDS * 1000);
    const cpuDown = (await cpuSeconds(agent.pid())) - cpuBefore;
    await apiserver.start();
    await apiserverReady(cluster);
    const backAt = Date.now();
    const created = await createdBetween(cluster.runtime.socket, downAt, backAt);
    let lastMismatch: string[] = [];
    await eventually(
      "every pod's API status equal to the runtime's",
      async () => {
        lastMismatch = await statusMismatches(cluster, node);
        return lastMismatch.length === 0 ? true : undefined;
      },
      120_000,
      500,
    ).catch(() => undefined);
    const syncedSeconds = (Date.now() - backAt) / 1000;
    await eventually(
      'the Lease renewed',
      async () => ((await leaseRenewedAfter(cluster, node, backAt)) ? true : undefined),
      60_000,
      1000,
    );
    const leaseSeconds = (Date.now() - backAt) / 1000;
    const killed = await steadyUnchanged();
    const restartsDuringOutage = [...created].filter(([pod]) => /^(crasher|liveness)/.test(pod));
    await recordFigures(`api-outage-${AGENT}`, {
      agent: AGENT,
      outageSeconds: OUTAGE_SECONDS,
      pods: STEADY + 4,
      containersStartedDuringOutage: restartsDuringOutage.reduce((n, [, c]) => n + c, 0),
      agentCpuSecondsDuringOutage: Math.round(cpuDown * 100) / 100,
      statusSyncedSeconds: syncedSeconds,
      leaseRenewedSeconds: leaseSeconds,
      steadyPodsKilled: killed.length,
    });
    assert.deepEqual(lastMismatch, [], 'API status equals the runtime');
    assert.ok(
      syncedSeconds <= 20,
      `API status equal to the runtime ${syncedSeconds} s after the API returned`,
    );
    assert.deepEqual(killed, [], 'no running pod was killed');
    assert.ok(
      created.get('liveness') !== undefined,
      'the liveness probe restarted its container during the outage',
    );
    for (let i = 0; i < 3; i++)
      assert.ok(
        created.get(`crasher-${i}`) !== undefined,
        `crasher-${i} restarted during the outage`,
      );
  });

  for (const mode of ['429', '500', 'hang'] as const satisfies readonly FaultMode[]) {
    test(`the apiserver answering ${mode} for ${WINDOW_SECONDS} s`, async () => {
      assert.ok(proxy);
      const before = proxy.counts[mode];
      const kinds0 = new Map(proxy.faulted);
      const cpu0 = await cpuSeconds(agent.pid());
      proxy.mode = mode;
      const start = Date.now();
      // A pod bound while berth cannot read: it must run once the window is over.
      const name = `during-${mode}`;
      await applyJson(cluster, busyboxPod(cluster, name, node, { grace: 1 }));
      await sleep(WINDOW_SECONDS * 1000);
      proxy.mode = 'pass';
      const windowSeconds = (Date.now() - start) / 1000;
      const cpu = (await cpuSeconds(agent.pid())) - cpu0;
      const requests = proxy.counts[mode] - before;
      const endAt = Date.now();
      assert.ok(agent.pid() > 0);
      await eventually(
        `${name} Running`,
        async () => {
          const pod = (await podsOnNode(cluster, node)).find((p) => p.metadata?.name === name);
          if (pod !== undefined && isRunningAndReady(pod)) return true;
          // The last state seen is what a timeout reports.
          throw new Error(podState(pod));
        },
        120_000,
        1000,
      );
      const podRunningSeconds = (Date.now() - endAt) / 1000;
      await eventually(
        'the Lease renewed',
        async () => ((await leaseRenewedAfter(cluster, node, endAt)) ? true : undefined),
        60_000,
        1000,
      );
      const leaseSeconds = (Date.now() - endAt) / 1000;
      const killed = await steadyUnchanged();
      await cluster.kubectl(['delete', 'pod', name, '--wait=false']);
      await recordFigures(`api-proxy-${mode}-${AGENT}`, {
        agent: AGENT,
        mode,
        windowSeconds,
        requestsDuringWindow: requests,
        requestsPerSecond: Math.round((requests / windowSeconds) * 10) / 10,
        agentCpuSeconds: Math.round(cpu * 100) / 100,
        podRunningAfterSeconds: podRunningSeconds,
        leaseRenewedAfterSeconds: leaseSeconds,
        steadyPodsKilled: killed.length,
        busiestRequest: busiest(kinds0, proxy.faulted),
      });
      assert.deepEqual(killed, []);
      // A hot loop is hundreds of requests a second and a whole core; backoff is neither.
      assert.ok(requests / windowSeconds < 10, `${requests} requests in ${windowSeconds} s`);
      assert.ok(cpu < windowSeconds * 0.25, `${cpu} CPU seconds in ${windowSeconds} s`);
    });
  }

  test('watches answered 410 Gone (resourceVersion too old)', async () => {
    assert.ok(proxy);
    const before = proxy.counts['watch-410'];
    const kinds0 = new Map(proxy.faulted);
    const passBefore = proxy.counts.pass;
    const cpu0 = await cpuSeconds(agent.pid());
    proxy.mode = 'watch-410';
    const start = Date.now();
    await applyJson(cluster, busyboxPod(cluster, 'during-410', node, { grace: 1 }));
    await sleep(WINDOW_SECONDS * 1000);
    proxy.mode = 'pass';
    const windowSeconds = (Date.now() - start) / 1000;
    const cpu = (await cpuSeconds(agent.pid())) - cpu0;
    const watches = proxy.counts['watch-410'] - before;
    const others = proxy.counts.pass - passBefore;
    const top = busiest(kinds0, proxy.faulted);
    const topCount = Number(top.split(' x')[1] ?? '0');
    // Listed during the window (relists pass): the pod runs even before watches work again.
    await eventually(
      'during-410 Running',
      async () => {
        const pod = (await podsOnNode(cluster, node)).find(
          (p) => p.metadata?.name === 'during-410',
        );
        return pod !== undefined && isRunningAndReady(pod) ? true : undefined;
      },
      120_000,
      1000,
    );
    const killed = await steadyUnchanged();
    await recordFigures(`watch-410-${AGENT}`, {
      agent: AGENT,
      windowSeconds,
      watchesAnswered410: watches,
      otherRequests: others,
      busiestWatch: top,
      agentCpuSeconds: Math.round(cpu * 100) / 100,
      steadyPodsKilled: killed.length,
    });
    assert.ok(watches > 0, 'the agent watched during the window');
    assert.deepEqual(killed, [], 'nothing the API binds here was killed');
    // client-go waits 0.8, 1.6, 3.2, ... s between ListAndWatch calls: about 6 in 30 s.
    assert.ok(topCount <= 10, `${top} in ${windowSeconds} s: relists back off`);
    assert.ok(cpu < windowSeconds * 0.25, `${cpu} CPU seconds in ${windowSeconds} s`);
  });
});

/** Phase, conditions and container states in one line, for a timeout's message. */
function podState(pod: Pod | undefined): string {
  if (pod === undefined) return 'not in the API';
  const st = pod.status;
  const conditions = (st?.conditions ?? []).map((c) => `${c.type}=${c.status}`).join(',');
  const containers = (st?.containerStatuses ?? [])
    .map((c) => {
      const reason = c.state?.waiting?.reason ?? c.state?.terminated?.reason;
      const kind = Object.keys(c.state ?? {}).join('');
      return `${c.name}:${kind}${reason === undefined ? '' : `(${reason})`}`;
    })
    .join(',');
  return `phase ${st?.phase ?? '-'} ${st?.reason ?? ''} [${conditions}] containers [${containers}]`;
}
