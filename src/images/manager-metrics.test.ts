import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { KubeletMetrics } from '../metrics/registry.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ImageManager } from './manager.ts';

describe('ImageManager metrics', () => {
  test('a successful pull is timed by image size; a failed one is not', async () => {
    const clock = new FakeClock();
    const cri = new FakeCriClient({ clock });
    const metrics = new KubeletMetrics();
    const images = new ImageManager({
      images: cri.image,
      recorder: new MemoryEventRecorder(),
      clock,
      logger: new MemoryLogger(),
      backoff: new Backoff(clock, { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 }),
      maxParallelPulls: 1,
      metrics,
    });
    cri.addImage('reg.local/app:1', { sizeBytes: 50 * 1024 * 1024 });
    const pod = { metadata: { uid: 'u1', name: 'p', namespace: 'ns' } };
    const target = { kind: 'Pod' as const, namespace: 'ns', name: 'p', uid: 'u1' };
    const signal = new AbortController().signal;
    const ok = await images.ensureImage(
      pod,
      { name: 'c', image: 'reg.local/app:1', imagePullPolicy: 'Always' },
      [],
      undefined,
      target,
      signal,
    );
    assert.equal(ok.ok, true);
    const failed = await images.ensureImage(
      pod,
      { name: 'c', image: 'reg.local/missing:1', imagePullPolicy: 'Always' },
      [],
      undefined,
      target,
      signal,
    );
    assert.equal(failed.ok, false);
    const text = await metrics.registry.metrics();
    assert.match(
      text,
      /^kubelet_image_pull_duration_seconds_count\{image_size_in_bytes="10MB-100MB"\} 1$/m,
    );
    assert.doesNotMatch(text, /image_pull_duration_seconds_count\{image_size_in_bytes="N\/A"\}/);
  });
});
