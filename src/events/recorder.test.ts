/** ApiEventRecorder against FakeKubeClient on a FakeClock. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Event } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import {
  EVENTS,
  inNamespace,
  KubeApiError,
  type ResourcePath,
  type WriteOptions,
} from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ApiEventRecorder, type ApiEventRecorderOptions } from './recorder.ts';
import type { EventTarget } from './types.ts';

const pod: EventTarget = {
  kind: 'Pod',
  namespace: 'ns',
  name: 'web-0',
  uid: 'uid-1',
  fieldPath: 'spec.containers{main}',
};
const node: EventTarget = { kind: 'Node', name: 'node-1', uid: 'node-1' };

async function settle(recorder: ApiEventRecorder): Promise<void> {
  for (let i = 0; i < 100 && recorder.stats().queued > 0; i++) {
    await new Promise((r) => setImmediate(r));
  }
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

function setup(client = new FakeKubeClient(), options: Partial<ApiEventRecorderOptions> = {}) {
  const clock = new FakeClock();
  const logger = new MemoryLogger();
  const recorder = new ApiEventRecorder({
    client,
    nodeName: 'node-1',
    clock,
    logger,
    random: () => 0,
    ...options,
  });
  const events = (ns = 'ns'): Event[] => client.objects<Event>(inNamespace(EVENTS, ns));
  return { client, clock, logger, recorder, events };
}

describe('ApiEventRecorder', () => {
  test('creates core/v1 Events shaped like the kubelet’s', async () => {
    const { recorder, events } = setup();
    recorder.event(pod, 'Normal', 'Pulled', 'Successfully pulled image "busybox"');
    recorder.event(
      node,
      'Warning',
      'InvalidDiskCapacity',
      'invalid capacity 0 on image filesystem',
    );
    await settle(recorder);
    const [event] = events();
    assert.ok(event !== undefined);
    assert.match(event.metadata.name ?? '', /^web-0\.[0-9a-f]+$/);
    assert.deepEqual(event.involvedObject, {
      kind: 'Pod',
      namespace: 'ns',
      name: 'web-0',
      uid: 'uid-1',
      apiVersion: 'v1',
      fieldPath: 'spec.containers{main}',
    });
    assert.equal(event.reason, 'Pulled');
    assert.equal(event.type, 'Normal');
    assert.deepEqual(event.source, { component: 'kubelet', host: 'node-1' });
    assert.equal(event.reportingComponent, 'kubelet');
    assert.equal(event.reportingInstance, 'node-1');
    assert.equal(event.firstTimestamp, '2026-01-01T00:00:00Z');
    assert.equal(event.lastTimestamp, '2026-01-01T00:00:00Z');
    assert.equal(event.count, 1);
    // Cluster-scoped objects record into "default", as upstream.
    assert.equal(events('default')[0]?.involvedObject.kind, 'Node');
    assert.equal(recorder.stats().created, 2);
  });

  test('an identical event patches count and lastTimestamp; another message is a new Event', async () => {
    const { recorder, events, clock, client } = setup();
    recorder.event(pod, 'Warning', 'BackOff', 'Back-off restarting failed container');
    await settle(recorder);
    await clock.advance(65_000);
    recorder.event(pod, 'Warning', 'BackOff', 'Back-off restarting failed container');
    recorder.event(pod, 'Warning', 'BackOff', 'Back-off restarting failed container');
    await settle(recorder);
    assert.equal(events().length, 1);
    assert.equal(events()[0]?.count, 3);
    assert.equal(events()[0]?.firstTimestamp, '2026-01-01T00:00:00Z');
    assert.equal(events()[0]?.lastTimestamp, '2026-01-01T00:01:05Z');
    assert.ok(client.calls.some((c) => c.verb === 'patch' && c.patchType === 'strategic'));
    recorder.event(pod, 'Warning', 'BackOff', 'Back-off pulling image');
    await settle(recorder);
    assert.equal(events().length, 2);
    assert.deepEqual(recorder.stats(), {
      created: 2,
      patched: 2,
      droppedRateLimited: 0,
      droppedQueueFull: 0,
      droppedClosed: 0,
      failed: 0,
      queued: 0,
    });
  });

  test('an aggregated Event deleted meanwhile is created again with the running count', async () => {
    const { recorder, events, client } = setup();
    recorder.event(pod, 'Normal', 'Started', 'Started container main');
    await settle(recorder);
    await client.delete(inNamespace(EVENTS, 'ns'), events()[0]?.metadata.name ?? '');
    recorder.event(pod, 'Normal', 'Started', 'Started container main');
    await settle(recorder);
    assert.equal(events().length, 1);
    assert.equal(events()[0]?.count, 2);
  });

  test('events over eventRecordQPS/eventBurst are dropped and counted', async () => {
    const { recorder, events, clock, logger } = setup(undefined, { qps: 1, burst: 2 });
    for (let i = 0; i < 5; i++) recorder.event(pod, 'Normal', 'Created', `Created container c${i}`);
    await settle(recorder);
    assert.equal(events().length, 2);
    assert.equal(recorder.stats().droppedRateLimited, 3);
    assert.ok(logger.records.some((r) => r.msg === 'Dropping events over the event rate limit'));
    await clock.advance(1000);
    recorder.event(pod, 'Normal', 'Created', 'Created container late');
    await settle(recorder);
    assert.equal(events().length, 3);
  });

  test('a full queue drops new events instead of growing', async () => {
    const { recorder } = setup(undefined, { queueSize: 2 });
    // The first goes straight to the sender; two wait; the rest do not fit.
    for (let i = 0; i < 6; i++) recorder.event(pod, 'Normal', 'Created', `m${i}`);
    assert.equal(recorder.stats().droppedQueueFull, 3);
    await settle(recorder);
    assert.equal(recorder.stats().created, 3);
  });

  test('transient failures are retried with back-off; others are dropped; the caller never sees them', async () => {
    const client = new FakeKubeClient();
    const { recorder, events, clock } = setup(client);
    client.failNext({
      verb: 'create',
      error: new KubeApiError(503, 'Unknown', 'unavailable'),
      times: 2,
    });
    recorder.event(pod, 'Normal', 'Pulling', 'Pulling image "x"');
    await settle(recorder);
    assert.equal(events().length, 0);
    await clock.advance(1000);
    await settle(recorder);
    await clock.advance(2000);
    await settle(recorder);
    assert.equal(events().length, 1);
    client.failNext({
      verb: 'create',
      error: new KubeApiError(403, 'Forbidden', 'namespace terminating'),
    });
    assert.doesNotThrow(() => {
      recorder.event(pod, 'Normal', 'Killing', 'Stopping container main');
    });
    await settle(recorder);
    assert.equal(recorder.stats().failed, 1);
    assert.equal(events().length, 1);
  });

  test('close drains the queue, then drops new events', async () => {
    const { recorder, events } = setup();
    for (let i = 0; i < 3; i++) recorder.event(pod, 'Normal', 'Created', `m${i}`);
    await recorder.close();
    assert.equal(events().length, 3);
    recorder.event(pod, 'Normal', 'Created', 'after close');
    await settle(recorder);
    assert.equal(recorder.stats().droppedClosed, 1);
    await recorder.close();
  });

  test('close gives up after its timeout and aborts the request in flight', async () => {
    class HangingClient extends FakeKubeClient {
      override create<T>(_path: ResourcePath, _body: T, options: WriteOptions = {}): Promise<T> {
        return new Promise((_resolve, reject) => {
          options.signal?.addEventListener('abort', () => {
            reject(options.signal?.reason as Error);
          });
        });
      }
    }
    const { recorder, clock } = setup(new HangingClient());
    for (let i = 0; i < 3; i++) recorder.event(pod, 'Normal', 'Created', `m${i}`);
    const closing = recorder.close(2000);
    await clock.advance(2000);
    await closing;
    assert.equal(recorder.stats().droppedClosed, 3);
    assert.equal(recorder.stats().queued, 0);
  });
});
