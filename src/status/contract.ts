/**
 * The PodStatusManager contract: what the pod sync and its neighbours rely on.
 * StatusManager (over the fake API client, on the fake clock) and FakeStatusManager
 * pass it; both run it from contract.test.ts. Patch shapes, conditions owned by other
 * controllers, mirror pods and retries stay in manager.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { PodStatusManager } from './types.ts';

export interface StatusContractSubject {
  readonly status: PodStatusManager;
  /** A pod that exists in the API (no status yet). */
  readonly pod: Pod;
  /** The status the pod's API object holds now (after drain). */
  apiStatus(): Promise<PodStatus | undefined>;
  /** How many status writes reached the API so far. */
  writes(): number;
}

const running = (ip: string): PodStatus => ({
  phase: 'Running',
  conditions: [{ type: 'Ready', status: 'True' }],
  podIP: ip,
  podIPs: [{ ip }],
});

export function podStatusManagerContract(
  name: string,
  make: () => Promise<StatusContractSubject>,
): void {
  describe(`PodStatusManager contract: ${name}`, () => {
    test('a status set is read back and reaches the API once, however often it is set', async () => {
      const s = await make();
      const uid = s.pod.metadata?.uid ?? '';
      s.status.set(s.pod, running('10.88.0.5'));
      assert.equal(s.status.get(uid)?.podIP, '10.88.0.5');
      await s.status.drain();
      assert.equal((await s.apiStatus())?.podIP, '10.88.0.5');
      const before = s.writes();
      s.status.set(s.pod, running('10.88.0.5'));
      s.status.resend(uid);
      await s.status.drain();
      assert.equal(s.writes(), before, 'an unchanged status is not written again');
      s.status.set(s.pod, running('10.88.0.6'));
      await s.status.drain();
      assert.equal((await s.apiStatus())?.podIP, '10.88.0.6');
      assert.equal(s.writes(), before + 1);
    });

    test('amendTerminal rewrites terminal statuses only', async () => {
      const s = await make();
      const uid = s.pod.metadata?.uid ?? '';
      s.status.amendTerminal(uid, (st) => ({ ...st, reason: 'Evicted', message: 'low memory' }));
      s.status.set(s.pod, running('10.88.0.5'));
      assert.equal(s.status.get(uid)?.reason, undefined);
      s.status.set(s.pod, { ...running('10.88.0.5'), phase: 'Failed' });
      assert.equal(s.status.get(uid)?.reason, 'Evicted');
      await s.status.drain();
      const api = await s.apiStatus();
      assert.deepEqual(
        [api?.phase, api?.reason, api?.message],
        ['Failed', 'Evicted', 'low memory'],
      );
    });

    test('remove forgets the pod; run stops on abort', async () => {
      const s = await make();
      const uid = s.pod.metadata?.uid ?? '';
      s.status.set(s.pod, running('10.88.0.5'));
      await s.status.drain();
      s.status.remove(uid);
      assert.equal(s.status.get(uid), undefined);
      const ac = new AbortController();
      const loop = s.status.run(ac.signal);
      ac.abort();
      await loop;
    });
  });
}
