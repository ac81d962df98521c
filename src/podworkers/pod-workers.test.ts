import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { PodWorkers } from './pod-workers.ts';
import type { PodSyncer, SyncResult } from './types.ts';

function pod(uid: string, extra: Partial<NonNullable<Pod['metadata']>> = {}): Pod {
  return {
    metadata: { uid, name: `p-${uid}`, namespace: 'ns', ...extra },
    spec: { containers: [{ name: 'c' }] },
  };
}

class RecordingSyncer implements PodSyncer {
  readonly calls: string[] = [];
  result: SyncResult = {};
  fail = false;
  gate: Promise<void> | undefined;
  async syncPod(p: Pod, signal: AbortSignal): Promise<SyncResult> {
    this.calls.push(`sync:${p.metadata?.uid ?? ''}:${p.metadata?.resourceVersion ?? ''}`);
    if (this.gate !== undefined) {
      await Promise.race([
        this.gate,
        new Promise((_r, reject) => {
          signal.addEventListener('abort', () => {
            reject(new Error('aborted'));
          });
        }),
      ]);
    }
    if (this.fail) throw new Error('boom');
    return this.result;
  }
  syncTerminatingPod(p: Pod, grace: number): Promise<void> {
    this.calls.push(`terminating:${p.metadata?.uid ?? ''}:${grace}`);
    return Promise.resolve();
  }
  syncTerminatedPod(p: Pod): Promise<void> {
    this.calls.push(`terminated:${p.metadata?.uid ?? ''}`);
    return Promise.resolve();
  }
}

const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
};

describe('PodWorkers', () => {
  test('a new pod is synced; an update syncs it again with the newest spec', async () => {
    const syncer = new RecordingSyncer();
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    w.update(pod('a', { resourceVersion: '1' }), 'add');
    await settle();
    w.update(pod('a', { resourceVersion: '2' }), 'update');
    await settle();
    assert.deepEqual(syncer.calls, ['sync:a:1', 'sync:a:2']);
    assert.equal(w.state('a'), 'syncing');
  });

  test('updates arriving during a sync coalesce into one more sync of the newest pod', async () => {
    const syncer = new RecordingSyncer();
    let open = (): void => undefined;
    syncer.gate = new Promise<void>((r) => {
      open = r;
    });
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    w.update(pod('a', { resourceVersion: '1' }), 'add');
    await settle();
    w.update(pod('a', { resourceVersion: '2' }), 'update');
    w.update(pod('a', { resourceVersion: '3' }), 'update');
    syncer.gate = undefined;
    open();
    await settle();
    assert.deepEqual(syncer.calls, ['sync:a:1', 'sync:a:3']);
  });

  test('a deletion timestamp aborts the sync and terminates with the grace period, then forgets on removal', async () => {
    const syncer = new RecordingSyncer();
    syncer.gate = new Promise<void>(() => undefined); // the first sync never finishes by itself
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    w.update(pod('a'), 'add');
    await settle();
    syncer.gate = undefined;
    w.update(
      pod('a', { deletionTimestamp: '2026-01-01T00:00:00Z', deletionGracePeriodSeconds: 7 }),
      'update',
    );
    await settle();
    assert.deepEqual(syncer.calls, ['sync:a:', 'terminating:a:7', 'terminated:a']);
    assert.equal(w.state('a'), 'terminated');
    w.update(pod('a'), 'remove');
    await settle();
    assert.equal(w.state('a'), undefined);
  });

  test('a deleted pod cleaned up is left alone by later updates (a finalizer keeps it) until removed', async () => {
    const syncer = new RecordingSyncer();
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    const deleted = pod('a', { deletionTimestamp: '2026-01-01T00:00:00Z' });
    w.update(deleted, 'add');
    await settle();
    assert.deepEqual(syncer.calls, ['terminating:a:30', 'terminated:a']);
    w.update({ ...deleted, metadata: { ...deleted.metadata, resourceVersion: '2' } }, 'update');
    w.resyncAll();
    await settle();
    assert.deepEqual(syncer.calls, ['terminating:a:30', 'terminated:a']);
    w.update(deleted, 'remove');
    await settle();
    assert.deepEqual(syncer.calls, ['terminating:a:30', 'terminated:a', 'terminated:a']);
    assert.equal(w.state('a'), undefined);
  });

  test('grace periods below 2 s are raised to 2 s; a forced deletion (0) is honoured', async () => {
    const syncer = new RecordingSyncer();
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    w.update(pod('a', { deletionTimestamp: 'x', deletionGracePeriodSeconds: 1 }), 'add');
    w.update(pod('b', { deletionTimestamp: 'x', deletionGracePeriodSeconds: 0 }), 'add');
    await settle();
    assert.ok(syncer.calls.includes('terminating:a:2'));
    assert.ok(syncer.calls.includes('terminating:b:0'));
  });

  test('a terminal sync result terminates the pod; a terminated pod is never synced again', async () => {
    const syncer = new RecordingSyncer();
    syncer.result = { terminal: true };
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    w.update(pod('a'), 'add');
    await settle();
    w.update(pod('a', { resourceVersion: '9' }), 'update');
    await settle();
    assert.deepEqual(syncer.calls, ['sync:a:', 'terminating:a:30', 'terminated:a', 'terminated:a']);
  });

  test('a failed sync is retried after the error back-off; requeueAfterMs resyncs when due', async () => {
    const clock = new FakeClock();
    const syncer = new RecordingSyncer();
    syncer.fail = true;
    const w = new PodWorkers({ syncer, clock, logger: new MemoryLogger(), errorBackoffMs: 10_000 });
    w.update(pod('a'), 'add');
    await settle();
    assert.equal(syncer.calls.length, 1);
    await clock.advance(9_999);
    await settle();
    assert.equal(syncer.calls.length, 1);
    syncer.fail = false;
    syncer.result = { requeueAfterMs: 20_000 };
    await clock.advance(1);
    await settle();
    assert.equal(syncer.calls.length, 2);
    await clock.advance(20_000);
    await settle();
    assert.equal(syncer.calls.length, 3);
    await w.close();
  });

  test('close stops taking work without terminating pods', async () => {
    const syncer = new RecordingSyncer();
    const w = new PodWorkers({ syncer, clock: new FakeClock(), logger: new MemoryLogger() });
    w.update(pod('a'), 'add');
    await settle();
    await w.close();
    w.update(pod('a', { resourceVersion: '2' }), 'update');
    await settle();
    assert.deepEqual(syncer.calls, ['sync:a:']);
  });
});
