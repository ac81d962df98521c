/** The EventRecorder contract against the API recorder and the in-memory one. */
import type { Event } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { EVENTS, inNamespace } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { eventRecorderContract, type RecordedEvent } from './contract.ts';
import { ApiEventRecorder } from './recorder.ts';
import { MemoryEventRecorder, type EventType } from './types.ts';

eventRecorderContract('ApiEventRecorder (fake API client, fake clock)', () => {
  const client = new FakeKubeClient();
  const recorder = new ApiEventRecorder({
    client,
    nodeName: 'node-1',
    clock: new FakeClock(),
    logger: new MemoryLogger(),
    random: () => 0,
  });
  return {
    recorder,
    delivered: async (): Promise<RecordedEvent[]> => {
      // close() sends what is queued; nothing is left in flight afterwards.
      await recorder.close();
      const all = [
        ...client.objects<Event>(inNamespace(EVENTS, 'ns')),
        ...client.objects<Event>(inNamespace(EVENTS, 'default')),
      ];
      // Event names end in the creation time in hex nanoseconds: their order is the order sent.
      const sent = (e: Event): bigint =>
        BigInt(`0x${(e.metadata.name ?? '.0').split('.').pop() ?? '0'}`);
      all.sort((a, b) => (sent(a) < sent(b) ? -1 : sent(a) > sent(b) ? 1 : 0));
      return all.map((e) => ({
        target: {
          kind: e.involvedObject.kind === 'Node' ? 'Node' : 'Pod',
          name: e.involvedObject.name ?? '',
          uid: e.involvedObject.uid ?? '',
          ...(e.involvedObject.namespace === undefined
            ? {}
            : { namespace: e.involvedObject.namespace }),
          ...(e.involvedObject.fieldPath === undefined
            ? {}
            : { fieldPath: e.involvedObject.fieldPath }),
        },
        type: e.type as EventType,
        reason: e.reason ?? '',
        message: e.message ?? '',
      }));
    },
  };
});

eventRecorderContract('MemoryEventRecorder', () => {
  const recorder = new MemoryEventRecorder();
  return { recorder, delivered: () => Promise.resolve([...recorder.events]) };
});
