/**
 * The PodAdmission contract: what the pod consumer relies on. AdmissionManager (on a
 * Node every contract pod fits) and FakePodAdmission pass it; both run it from
 * contract.test.ts. The node predicates themselves are the real manager's own
 * (predicates.test.ts, manager.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import type { MemoryEventRecorder } from '../events/types.ts';
import type { PodAdmission, PodAdmitHandler } from './types.ts';

export interface AdmissionContractSubject {
  readonly admission: PodAdmission;
  readonly recorder: MemoryEventRecorder;
  /** Statuses the admission wrote, by UID. */
  readonly statuses: ReadonlyMap<string, PodStatus>;
}

/** The label that makes the contract's handler refuse a pod, with the label's value as reason. */
export const REFUSE_LABEL = 'contract/refuse';

/** Builds the subject; `handlers` are asked before anything else. */
export type AdmissionContractFactory = (
  handlers: readonly PodAdmitHandler[],
) => AdmissionContractSubject;

function pod(name: string, extra: { refuse?: string; phase?: string } = {}): Pod {
  return {
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      ...(extra.refuse !== undefined && { labels: { [REFUSE_LABEL]: extra.refuse } }),
    },
    spec: { containers: [{ name: 'c', image: 'registry.test/c:1' }] },
    ...(extra.phase !== undefined && { status: { phase: extra.phase } }),
  };
}

/** Refuses pods with the label (reason: its value), while `on` says so. */
function labelHandler(on: () => boolean = () => true): PodAdmitHandler {
  return {
    admit: (p) => {
      const reason = p.metadata?.labels?.[REFUSE_LABEL];
      return reason === undefined || !on()
        ? { admit: true }
        : { admit: false, reason, message: `refused by the contract: ${reason}` };
    },
  };
}

export function podAdmissionContract(name: string, make: AdmissionContractFactory): void {
  describe(`PodAdmission contract: ${name}`, () => {
    test('a pod nothing refuses is admitted, with no status and no event', () => {
      const s = make([labelHandler()]);
      assert.equal(s.admission.admit(pod('a')), true);
      assert.equal(s.admission.admit(pod('a')), true);
      assert.equal(s.admission.isRejected('uid-a'), false);
      assert.equal(s.statuses.size, 0);
      assert.deepEqual(s.recorder.events, []);
    });

    test('a refused pod gets a Warning event and phase Failed, once', () => {
      const s = make([labelHandler()]);
      const p = pod('b', { refuse: 'OutOfThings' });
      assert.equal(s.admission.admit(p), false);
      assert.equal(s.admission.isRejected('uid-b'), true);
      const status = s.statuses.get('uid-b');
      assert.deepEqual(
        [status?.phase, status?.reason, status?.message, status?.qosClass],
        [
          'Failed',
          'OutOfThings',
          'Pod was rejected: refused by the contract: OutOfThings',
          'BestEffort',
        ],
      );
      assert.deepEqual(
        s.recorder.events.map((e) => [e.type, e.reason, e.message, e.target.uid]),
        [['Warning', 'OutOfThings', 'refused by the contract: OutOfThings', 'uid-b']],
      );
      assert.equal(s.admission.admit(p), false, 'asked again (an update): still rejected');
      assert.equal(s.recorder.events.length, 1, 'and no second event');
    });

    test('the first refusing handler decides', () => {
      const second: PodAdmitHandler = {
        admit: () => ({ admit: false, reason: 'Second', message: 'second' }),
      };
      const s = make([labelHandler(), second]);
      assert.equal(s.admission.admit(pod('c', { refuse: 'First' })), false);
      assert.deepEqual(s.recorder.reasons(), ['First']);
      assert.equal(s.admission.admit(pod('d')), false);
      assert.deepEqual(s.recorder.reasons(), ['First', 'Second']);
    });

    test('the decision holds until the pod is forgotten', () => {
      let refusing = false;
      const s = make([labelHandler(() => refusing)]);
      const p = pod('e', { refuse: 'Later' });
      assert.equal(s.admission.admit(p), true);
      refusing = true;
      assert.equal(s.admission.admit(p), true, 'an admitted pod keeps running');
      s.admission.forget('uid-e');
      assert.equal(s.admission.admit(p), false, 'a new object is decided anew');
      refusing = false;
      assert.equal(s.admission.admit(p), false, 'a rejected pod stays rejected');
      s.admission.forget('uid-e');
      assert.equal(s.admission.isRejected('uid-e'), false);
      assert.equal(s.admission.admit(p), true);
    });

    test('a pod that already ended is admitted without asking', () => {
      const s = make([labelHandler()]);
      assert.equal(s.admission.admit(pod('f', { refuse: 'No', phase: 'Succeeded' })), true);
      assert.equal(s.admission.isRejected('uid-f'), false);
      assert.deepEqual(s.recorder.events, []);
    });
  });
}
