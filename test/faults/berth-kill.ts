/**
 * The berth-kill scenario (berth-kill.test.ts runs it full size, berth-kill-quick.test.ts
 * in make test's fast subset): the node agent (berth, or the upstream kubelet with
 * FAULTS_AGENT=upstream) killed mid-operation (issue #32, item 4): SIGKILL at a random
 * point while a pod with configMap, secret and emptyDir volumes is being set up, while
 * an image is being pulled from the registry, or while a pod is being deleted; it is
 * started again each time over the same root directory. Afterwards every pod the API
 * binds to the node is Running and Ready, every deleted one is gone, and nothing
 * leaked: no ready sandbox or running container of a deleted pod, no second sandbox,
 * no mount, pod directory, cgroup or netns left. FAULTS_ITERATIONS and FAULTS_SEED set
 * the run.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { containerdPaths } from '../harness/containerd.ts';
import {
  applyJson,
  applyRegistrySecret,
  busyboxPod,
  eventually,
  isRunningAndReady,
} from '../harness/kube-helpers.ts';
import { waitFor } from '../harness/process.ts';
import { agentKind, nodeReady, podsOnNode, startAgent, type NodeAgent } from './agent.ts';
import { recordFigures, sizeFlag } from './figures.ts';
import { findPodLeaks } from './leaks.ts';

/** mulberry32: a small seeded generator, so a failing run can be repeated. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Operation = 'create-volumes' | 'create-pull' | 'delete';

function volumePod(cluster: Cluster, name: string, node: string): Pod {
  const pod = busyboxPod(cluster, name, node, { grace: 1 });
  const [main] = pod.spec?.containers ?? [];
  assert.ok(main);
  return {
    ...pod,
    spec: {
      ...pod.spec,
      volumes: [
        { name: 'cfg', configMap: { name: 'fault-cfg' } },
        { name: 'sec', secret: { secretName: 'fault-sec' } },
        { name: 'scratch', emptyDir: {} },
      ],
      containers: [
        {
          ...main,
          volumeMounts: [
            { name: 'cfg', mountPath: '/cfg' },
            { name: 'sec', mountPath: '/sec' },
            { name: 'scratch', mountPath: '/scratch' },
          ],
        },
      ],
    },
  };
}

function pullPod(cluster: Cluster, name: string, node: string): Pod {
  return busyboxPod(cluster, name, node, {
    grace: 1,
    image: cluster.images.busybox,
    imagePullPolicy: 'Always',
    extraSpec: { imagePullSecrets: [{ name: 'registry' }] },
  });
}

/** The scenario as a suite: `iterations` kills (FAULTS_ITERATIONS overrides), figures as `scenario`. */
export function berthKillScenario(defaultIterations: number, scenario: string): void {
  const ITERATIONS = sizeFlag('ITERATIONS', defaultIterations);
  const SEED = sizeFlag('SEED', Math.floor(Math.random() * 2 ** 31));
  const AGENT = agentKind();
  describe(`${AGENT} SIGKILLed mid-operation (${scenario})`, () => {
    let cluster: Cluster;
    let agent: NodeAgent;

    before(async () => {
      cluster = await startCluster({ runtime: 'containerd2' });
      agent = await startAgent(cluster, AGENT);
      await applyRegistrySecret(cluster, 'registry');
      await cluster.kubectl(['create', 'configmap', 'fault-cfg', '--from-literal=a=1']);
      await cluster.kubectl(['create', 'secret', 'generic', 'fault-sec', '--from-literal=b=2']);
    });

    after(async () => {
      await agent.stop();
      await cluster.stop();
      assert.deepEqual(await cluster.leaks(), []);
    });

    test(`${ITERATIONS} kills during pod creation, volume setup, image pulls and deletion (seed ${SEED})`, async () => {
      const node = agent.nodeName;
      const random = prng(SEED);
      await waitFor('the node Ready', async () => (await nodeReady(cluster, node)) === 'True', {
        timeoutMs: 90_000,
      });
      const ops: string[] = [];
      let created = 0;
      let deleted = 0;
      for (let i = 0; i < ITERATIONS; i++) {
        const live = (await podsOnNode(cluster, node)).filter(
          (p) => p.metadata?.deletionTimestamp === undefined,
        );
        const choice = random();
        const op: Operation =
          live.length > 2 && choice < 0.34
            ? 'delete'
            : choice < 0.67
              ? 'create-volumes'
              : 'create-pull';
        if (op === 'delete') {
          const victim = live[Math.floor(random() * live.length)]?.metadata?.name ?? '';
          await cluster.kubectl(['delete', 'pod', victim, '--wait=false']);
          deleted++;
        } else {
          const name = `kill-${i}`;
          await applyJson(
            cluster,
            op === 'create-pull' ? pullPod(cluster, name, node) : volumePod(cluster, name, node),
          );
          created++;
        }
        const delayMs = Math.floor(random() * 3000);
        ops.push(`${op}+${delayMs}ms`);
        await sleep(delayMs);
        await agent.restart('kill');
        // Let the new agent get some way into its start (or not: a short pause is a kill
        // during its own start-up, which must be survived too).
        await sleep(Math.floor(random() * 6000));
      }
      console.log(`${scenario} (${AGENT}) seed ${SEED}: ${ops.join(', ')}`);
      const settleStart = Date.now();
      let last: Pod[] = [];
      await eventually(
        'every pod Running and Ready and every deleted pod gone',
        async () => {
          last = await podsOnNode(cluster, node);
          return last.every(
            (p) => p.metadata?.deletionTimestamp === undefined && isRunningAndReady(p),
          )
            ? true
            : undefined;
        },
        240_000,
        2000,
      ).catch(() => undefined);
      const convergeSeconds = (Date.now() - settleStart) / 1000;
      const stuck = last
        .filter((p) => p.metadata?.deletionTimestamp !== undefined || !isRunningAndReady(p))
        .map(
          (p) =>
            `${p.metadata?.name ?? ''}: ${p.metadata?.deletionTimestamp !== undefined ? 'Terminating' : (p.status?.phase ?? '?')} ${JSON.stringify(p.status?.containerStatuses?.[0]?.state ?? {})}`,
        );
      const liveUids = new Set(last.map((p) => p.metadata?.uid ?? ''));
      const scope = {
        socket: cluster.runtime.socket,
        rootDir: agent.rootDir,
        cgroupRoot: agent.cgroupRoot,
        runtimeStateDir: containerdPaths(join(cluster.root, 'containerd')).state,
        liveUids,
      };
      let leaks: string[] = [];
      await eventually(
        'nothing of the deleted pods left',
        async () => {
          leaks = await findPodLeaks(scope);
          return leaks.length === 0 ? true : undefined;
        },
        120_000,
        2000,
      ).catch(() => undefined);
      await recordFigures(AGENT === 'berth' ? scenario : `${scenario}-${AGENT}`, {
        agent: AGENT,
        seed: SEED,
        kills: ITERATIONS,
        podsCreated: created,
        podsDeleted: deleted,
        podsRunningAtEnd: last.length,
        convergeSeconds,
        stuckPods: stuck.length,
        leaksFound: leaks.length,
      });
      assert.deepEqual(stuck, [], 'every pod converged');
      assert.deepEqual(leaks, [], 'nothing leaked');
    });
  });
}
