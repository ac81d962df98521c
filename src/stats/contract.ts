/**
 * The StatsProvider contract: what the eviction manager and the kubelet API's
 * /stats/summary and /metrics/resource read. The CRI stats provider (over the fake CRI
 * runtime, a fixed host and a temp dir) and FakeStatsProvider pass it; both run it from
 * contract.test.ts. Rates, filesystems and the Prometheus text are the CRI provider's
 * own behaviour and stay in stats.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StatsProvider } from './types.ts';

/** A pod running on the node, with its running containers' names. */
export interface ContractPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly containers: readonly string[];
}

export interface StatsContractSubject {
  readonly provider: StatsProvider;
  /** Makes the next summary's runtime read fail with `message`. */
  failNextRead(message: string): void;
  dispose(): Promise<void>;
}

export const CONTRACT_NODE = 'node-a';

const PODS: readonly ContractPod[] = [
  { namespace: 'ns', name: 'web', uid: 'uid-web', containers: ['app', 'sidecar'] },
  { namespace: 'kube-system', name: 'dns', uid: 'uid-dns', containers: ['coredns'] },
];

/** The pods of a summary as sorted `ns/name uid [containers]` lines. */
function podLines(
  pods: readonly {
    podRef: { namespace: string; name: string; uid: string };
    containers: readonly { name: string }[];
  }[],
): string[] {
  return pods
    .map((p) => {
      const names = p.containers.map((c) => c.name).sort();
      return `${p.podRef.namespace}/${p.podRef.name} ${p.podRef.uid} [${names.join(',')}]`;
    })
    .sort();
}

export function statsProviderContract(
  name: string,
  make: (nodeName: string, pods: readonly ContractPod[]) => Promise<StatsContractSubject>,
): void {
  describe(`StatsProvider contract: ${name}`, () => {
    test('the summary names the node and each running pod with its containers', async () => {
      const s = await make(CONTRACT_NODE, PODS);
      try {
        for (const onlyCpuAndMemory of [false, true]) {
          const summary = await s.provider.summary({ onlyCpuAndMemory });
          assert.equal(summary.node.nodeName, CONTRACT_NODE);
          assert.deepEqual(podLines(summary.pods), podLines(PODS.map(asStats)));
        }
      } finally {
        await s.dispose();
      }
    });

    test('an empty node has no pods', async () => {
      const s = await make(CONTRACT_NODE, []);
      try {
        assert.deepEqual((await s.provider.summary()).pods, []);
      } finally {
        await s.dispose();
      }
    });

    test('a failed runtime read rejects that summary only; an aborted signal rejects', async () => {
      const s = await make(CONTRACT_NODE, PODS);
      try {
        s.failNextRead('connection refused');
        await assert.rejects(s.provider.summary(), /connection refused/);
        assert.equal((await s.provider.summary()).pods.length, PODS.length);
        const ac = new AbortController();
        ac.abort(new Error('stop'));
        await assert.rejects(s.provider.summary({ signal: ac.signal }));
      } finally {
        await s.dispose();
      }
    });
  });
}

function asStats(p: ContractPod): {
  podRef: { namespace: string; name: string; uid: string };
  containers: { name: string }[];
} {
  return {
    podRef: { namespace: p.namespace, name: p.name, uid: p.uid },
    containers: p.containers.map((name) => ({ name })),
  };
}
