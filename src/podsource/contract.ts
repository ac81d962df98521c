/**
 * The PodSource contract: what the kubelet's pod handling relies on. ApiPodSource (over
 * the fake API client, on the fake clock) and FakePodSource pass it; both run it from
 * contract.test.ts. The field selector, resumption and watch restarts are the
 * reflector's own (src/kube/reflector.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { FakeClock } from '../util/clock.ts';
import type { PodSource } from './types.ts';

export interface PodSourceContractSubject {
  readonly source: PodSource;
  readonly clock: FakeClock;
  /** What the consumer received, as `add <name>`, `update <name>`, `remove <name>`. */
  readonly log: string[];
  /** Creates a pod bound to the node in the API (before or while the source runs). */
  create(pod: Pod): Promise<void>;
  /** Replaces the pod's labels in the API. */
  relabel(name: string, labels: Record<string, string>): Promise<void>;
  /** Deletes the pod from the API at once (grace period 0). */
  remove(name: string): Promise<void>;
  /** Breaks the watch, deletes the pod meanwhile, and lets the source re-list. */
  removeWhileDisconnected(name: string): Promise<void>;
  /** Makes the source's next `n` lists fail. */
  failLists(n: number): void;
  /** Lets the source deliver what is due now. */
  settle(): Promise<void>;
}

/** The node every contract pod is bound to. */
export const POD_SOURCE_NODE = 'node-a';

export function contractPod(name: string): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: { nodeName: POD_SOURCE_NODE, containers: [{ name: 'c', image: 'registry.test/c:1' }] },
  };
}

/** The names of the pods, sorted (the API assigns the UIDs). */
function names(pods: ReadonlyMap<string, Pod>): string[] {
  return [...pods.values()].map((p) => p.metadata?.name ?? '').sort();
}

/** Runs the source until its first list was delivered; `stop` aborts it and waits. */
async function started(s: PodSourceContractSubject): Promise<{ stop(): Promise<void> }> {
  const ac = new AbortController();
  const running = s.source.run(ac.signal);
  for (let i = 0; i < 100 && !s.source.synced; i++) await s.settle();
  assert.ok(s.source.synced, 'the first list was delivered');
  return {
    stop: () => {
      ac.abort();
      return running;
    },
  };
}

export function podSourceContract(name: string, make: () => PodSourceContractSubject): void {
  describe(`PodSource contract: ${name}`, () => {
    test('run lists the bound pods, then it is synced', async () => {
      const s = make();
      await s.create(contractPod('a'));
      await s.create(contractPod('b'));
      assert.equal(s.source.synced, false);
      assert.equal(s.source.pods().size, 0);
      const running = await started(s);
      assert.deepEqual([...s.log].sort(), ['add a', 'add b']);
      assert.deepEqual(names(s.source.pods()), ['a', 'b']);
      assert.equal(s.source.healthProblem(), undefined);
      await running.stop();
    });

    test('changes reach the consumer as add, update and remove', async () => {
      const s = make();
      const running = await started(s);
      await s.create(contractPod('c'));
      await s.relabel('c', { tier: 'web' });
      const c = [...s.source.pods().values()].find((p) => p.metadata?.name === 'c');
      assert.equal(c?.metadata?.labels?.['tier'], 'web');
      await s.remove('c');
      assert.deepEqual(s.log, ['add c', 'update c', 'remove c']);
      assert.equal(s.source.pods().size, 0);
      await running.stop();
    });

    test('a pod deleted while disconnected is removed by the re-list, the others untouched', async () => {
      const s = make();
      await s.create(contractPod('a'));
      await s.create(contractPod('b'));
      const running = await started(s);
      s.log.length = 0;
      await s.removeWhileDisconnected('a');
      assert.deepEqual(s.log, ['remove a']);
      assert.deepEqual(names(s.source.pods()), ['b']);
      await running.stop();
    });

    test('lists failing in a row make it unhealthy until one succeeds', async () => {
      const s = make();
      await s.create(contractPod('a'));
      s.failLists(6);
      const ac = new AbortController();
      const running = s.source.run(ac.signal);
      let sawProblem = false;
      // Small steps: the unhealthy window (the back-offs after the fifth and sixth
      // failures) is seen whatever the jitter.
      for (let i = 0; i < 2000 && !s.source.synced; i++) {
        await s.settle();
        if (s.source.healthProblem() !== undefined) {
          sawProblem = true;
          assert.equal(s.source.synced, false);
        }
        await s.clock.advance(500);
      }
      assert.ok(sawProblem, 'reported failing');
      assert.ok(s.source.synced);
      assert.equal(s.source.healthProblem(), undefined, 'healthy again');
      assert.deepEqual(s.log, ['add a']);
      ac.abort();
      await running;
    });
  });
}
