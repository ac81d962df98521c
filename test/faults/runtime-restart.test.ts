/**
 * Runtime restarts (issue #32, item 1): containerd SIGKILLed several times at random
 * moments while pods run and others are created and deleted. Afterwards every pod that
 * should run is Running and Ready, no container that was running when the runtime died
 * was restarted (containerd restarts keep the shims, so the containers live on), nothing
 * is stuck creating or terminating, every pod has exactly its one ready sandbox, and the
 * node went NotReady while the runtime was down and Ready within 20 s of its return.
 * On containerd 2.x and 1.6 (FAULTS_RUNTIMES=containerd2 picks one).
 *
 * Size for 2 cores by default (20 running, 6 churning, 4 kills); FAULTS_PODS,
 * FAULTS_CHURN and FAULTS_KILLS give the 40 / 10 / 6.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startCluster, type Cluster, type RuntimeKind } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getPod,
  isRunningAndReady,
} from '../harness/kube-helpers.ts';
import { waitFor } from '../harness/process.ts';
import {
  agentKind,
  containerIdentity,
  nodeReady,
  podsOnNode,
  runtimePods,
  startAgent,
  type NodeAgent,
} from './agent.ts';
import { recordFigures, sizeFlag } from './figures.ts';
import { Restartable } from './restartable.ts';

const PODS = sizeFlag('PODS', 20);
const CHURN = sizeFlag('CHURN', 6);
const KILLS = sizeFlag('KILLS', 4);
const RUNTIMES = (process.env['FAULTS_RUNTIMES'] ?? 'containerd2,containerd1')
  .split(',')
  .filter((r): r is RuntimeKind => r === 'containerd2' || r === 'containerd1');
const AGENT = agentKind();

function steadyPod(cluster: Cluster, name: string, node: string): Pod {
  const pod = busyboxPod(cluster, name, node, { grace: 2 });
  const [main] = pod.spec?.containers ?? [];
  assert.ok(main);
  return {
    ...pod,
    metadata: { ...pod.metadata, labels: { fault: 'steady' } },
    spec: {
      ...pod.spec,
      containers: [{ ...main, readinessProbe: { exec: { command: ['true'] }, periodSeconds: 5 } }],
    },
  };
}

async function runtimeReady(socket: string): Promise<void> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 2000 });
  try {
    await waitFor(
      'the runtime to answer CRI Status',
      async () => {
        const { status } = await client.runtime.status({});
        return (status?.conditions ?? []).some((c) => c.type === 'RuntimeReady' && c.status);
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
  } finally {
    client.close();
  }
}

for (const runtime of RUNTIMES) {
  describe(`runtime restarts on ${runtime} (${AGENT})`, () => {
    let cluster: Cluster;
    let agent: NodeAgent;
    let containerd: Restartable;

    before(async () => {
      cluster = await startCluster({ runtime });
      agent = await startAgent(cluster, AGENT);
      containerd = new Restartable(cluster.runtime.process);
    });

    after(async () => {
      await agent.stop();
      await cluster.stop();
      assert.deepEqual(await cluster.leaks(), []);
    });

    test(`${KILLS} containerd SIGKILLs with ${PODS} pods running and ${CHURN} churning`, async () => {
      const node = agent.nodeName;
      await waitFor('the node Ready', async () => (await nodeReady(cluster, node)) === 'True', {
        timeoutMs: 60_000,
      });
      for (let i = 0; i < PODS; i++)
        await applyJson(cluster, steadyPod(cluster, `steady-${i}`, node));
      const before = new Map<string, Pod>();
      await eventually(
        `${PODS} steady pods Running and Ready`,
        async () => {
          const pods = (await podsOnNode(cluster, node)).filter(
            (p) => p.metadata?.labels?.['fault'] === 'steady',
          );
          if (pods.length !== PODS || !pods.every(isRunningAndReady)) return undefined;
          for (const p of pods) before.set(p.metadata?.name ?? '', p);
          return true;
        },
        300_000,
        2000,
      );
      const sandboxesBefore = await runtimePods(cluster.runtime.socket);

      // Churn: each slot creates a pod, waits for it to run (or gives up after 90 s: the
      // runtime may be down), deletes it, and goes on, until the kills are over.
      let churning = true;
      const created: string[] = [];
      const churnErrors: string[] = [];
      const slot = async (s: number): Promise<void> => {
        for (let n = 0; churning; n++) {
          const name = `churn-${s}-${n}`;
          created.push(name);
          try {
            await applyJson(cluster, busyboxPod(cluster, name, node, { grace: 1 }));
            await eventually(
              `${name} Running`,
              async () =>
                (await getPod(cluster, 'default', name))?.status?.phase === 'Running'
                  ? true
                  : undefined,
              90_000,
              1000,
            ).catch(() => undefined);
            await cluster.kubectl(['delete', 'pod', name, '--wait=false']);
          } catch (err) {
            churnErrors.push(`${name}: ${String(err)}`);
          }
        }
      };
      const churn = Promise.all(Array.from({ length: CHURN }, (_, s) => slot(s)));

      const kills: {
        at: string;
        downSeconds: number;
        sawNotReady: boolean;
        readyAfterSeconds: number;
      }[] = [];
      try {
        for (let k = 0; k < KILLS; k++) {
          await sleep(5000 + Math.random() * 15_000);
          const downMs = 20_000 + Math.random() * 10_000;
          await containerd.kill();
          const at = new Date().toISOString();
          let sawNotReady = false;
          const deadline = Date.now() + downMs;
          while (Date.now() < deadline) {
            if ((await nodeReady(cluster, node).catch(() => undefined)) !== 'True')
              sawNotReady = true;
            await sleep(1000);
          }
          await containerd.start();
          await runtimeReady(cluster.runtime.socket);
          const back = Date.now();
          await waitFor(
            'the node Ready again',
            async () => (await nodeReady(cluster, node)) === 'True',
            {
              timeoutMs: 120_000,
              intervalMs: 500,
            },
          );
          kills.push({
            at,
            downSeconds: Math.round(downMs / 1000),
            sawNotReady,
            readyAfterSeconds: (Date.now() - back) / 1000,
          });
        }
      } finally {
        churning = false;
        await churn;
      }
      const recoverStart = Date.now();

      // Every steady pod: Running, Ready, the same containers, no restart, one sandbox.
      await eventually(
        'every steady pod Running and Ready after the kills',
        async () => {
          const pods = (await podsOnNode(cluster, node)).filter(
            (p) => p.metadata?.labels?.['fault'] === 'steady',
          );
          return pods.length === PODS && pods.every(isRunningAndReady) ? true : undefined;
        },
        120_000,
        2000,
      );
      // Every churn pod gone from the API (none stuck Terminating) and from the runtime.
      await eventually(
        'every churn pod gone from the API',
        async () => {
          const left = (await podsOnNode(cluster, node)).filter((p) =>
            (p.metadata?.name ?? '').startsWith('churn-'),
          );
          return left.length === 0 ? true : undefined;
        },
        120_000,
        2000,
      );
      const recoverSeconds = (Date.now() - recoverStart) / 1000;
      const pods = await podsOnNode(cluster, node);
      const inRuntime = await runtimePods(cluster.runtime.socket);
      const problems: string[] = [];
      for (const pod of pods) {
        const name = pod.metadata?.name ?? '';
        const was = before.get(name);
        if (was === undefined) {
          problems.push(`unexpected pod ${name} on the node`);
          continue;
        }
        if (containerIdentity(pod) !== containerIdentity(was))
          problems.push(
            `${name}: containers ${containerIdentity(was)} -> ${containerIdentity(pod)}`,
          );
        const uid = pod.metadata?.uid ?? '';
        const rt = inRuntime.get(uid);
        const earlier = sandboxesBefore.get(uid);
        if (rt?.readySandboxes.length !== 1)
          problems.push(`${name}: ${rt?.readySandboxes.length ?? 0} ready sandboxes`);
        else if (rt.readySandboxes[0] !== earlier?.readySandboxes[0])
          problems.push(
            `${name}: sandbox ${earlier?.readySandboxes[0] ?? 'none'} -> ${rt.readySandboxes[0] ?? 'none'}`,
          );
      }
      const liveUids = new Set(pods.map((p) => p.metadata?.uid ?? ''));
      await eventually(
        'no ready sandbox or running container of a deleted pod',
        async () => {
          const rt = await runtimePods(cluster.runtime.socket);
          const stale = [...rt].filter(
            ([uid, e]) =>
              !liveUids.has(uid) && (e.readySandboxes.length > 0 || e.runningContainers.length > 0),
          );
          return stale.length === 0 ? true : undefined;
        },
        60_000,
        2000,
      );
      await recordFigures(`runtime-restart-${runtime}-${AGENT}`, {
        agent: AGENT,
        runtime,
        steadyPods: PODS,
        churnSlots: CHURN,
        churnPodsCreated: created.length,
        kills: KILLS,
        downSeconds: kills.map((k) => k.downSeconds),
        readyAfterRuntimeSeconds: kills.map((k) => k.readyAfterSeconds),
        notReadySeen: kills.filter((k) => k.sawNotReady).length,
        convergeSeconds: recoverSeconds,
        restartedOrReplaced: problems.length,
        churnErrors: churnErrors.length,
      });
      assert.deepEqual(problems, [], 'steady pods kept their containers and their one sandbox');
      assert.deepEqual(churnErrors, []);
      for (const k of kills) {
        assert.ok(k.sawNotReady, `the node went NotReady while the runtime was down (${k.at})`);
        assert.ok(
          k.readyAfterSeconds <= 20,
          `the node Ready ${k.readyAfterSeconds} s after the runtime returned (${k.at})`,
        );
      }
    });
  });
}
