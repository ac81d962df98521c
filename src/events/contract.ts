/**
 * The EventRecorder contract: what the managers that record events rely on. The API
 * recorder (over the fake API client, on the fake clock) and MemoryEventRecorder (the
 * fake other folders' tests use) pass it; both run it from contract.test.ts.
 * Aggregation, rate limits and the Event's metadata are the API recorder's own
 * behaviour and stay in recorder.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { EventRecorder, EventTarget, EventType } from './types.ts';

/** One event as the subject delivered it. */
export interface RecordedEvent {
  readonly target: EventTarget;
  readonly type: EventType;
  readonly reason: string;
  readonly message: string;
}

export interface EventRecorderContractSubject {
  readonly recorder: EventRecorder;
  /** Waits until what was recorded has been delivered and returns it, oldest first. */
  delivered(): Promise<RecordedEvent[]>;
}

const pod: EventTarget = {
  kind: 'Pod',
  namespace: 'ns',
  name: 'web-0',
  uid: 'uid-1',
  apiVersion: 'v1',
  fieldPath: 'spec.containers{main}',
};
const node: EventTarget = { kind: 'Node', name: 'node-1', uid: 'node-1' };

export function eventRecorderContract(
  name: string,
  make: () => EventRecorderContractSubject,
): void {
  describe(`EventRecorder contract: ${name}`, () => {
    test('each event is delivered with its target, type, reason and message, in order', async () => {
      const s = make();
      s.recorder.event(pod, 'Normal', 'Pulled', 'Successfully pulled image "busybox"');
      s.recorder.event(node, 'Warning', 'InvalidDiskCapacity', 'invalid capacity 0');
      s.recorder.event(pod, 'Normal', 'Started', 'Started container main');
      const got = await s.delivered();
      assert.deepEqual(
        got.map((e) => [e.target.kind, e.target.name, e.target.uid, e.type, e.reason, e.message]),
        [
          ['Pod', 'web-0', 'uid-1', 'Normal', 'Pulled', 'Successfully pulled image "busybox"'],
          ['Node', 'node-1', 'node-1', 'Warning', 'InvalidDiskCapacity', 'invalid capacity 0'],
          ['Pod', 'web-0', 'uid-1', 'Normal', 'Started', 'Started container main'],
        ],
      );
      const [first] = got;
      assert.ok(first !== undefined);
      assert.equal(first.target.namespace, 'ns');
      assert.equal(first.target.fieldPath, 'spec.containers{main}');
    });

    test('event() returns at once and never throws, whatever it is given', async () => {
      const s = make();
      const odd = { kind: 'Pod', name: '', uid: '' } as const;
      // Typed as returning unknown: `void` would also admit an implementation's promise.
      const event: (...args: Parameters<EventRecorder['event']>) => unknown = s.recorder.event.bind(
        s.recorder,
      );
      const results = [
        event(odd, 'Normal', '', ''),
        event(pod, 'Warning', 'Failed', 'x'.repeat(100_000)),
      ];
      // Not a promise: a caller can never be made to wait on (or forget) delivery.
      assert.deepEqual(results, [undefined, undefined]);
      const got = await s.delivered();
      assert.ok(got.some((e) => e.reason === 'Failed'));
    });
  });
}
