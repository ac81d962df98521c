import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ImageGcManager, type ImageGcOptions } from './gc.ts';

const MINUTE = 60_000;

interface FakeImage {
  id: string;
  size: number;
  pinned?: boolean;
  tags?: string[];
}

function harness(
  images: FakeImage[],
  used: string[],
  fs: { capacityBytes: number; availableBytes: number },
  policy: Partial<ImageGcOptions['policy']> = {},
  /** Images the first container mounts as image volumes (its ContainerStatus mounts). */
  volumeImages: string[] = [],
) {
  const clock = new FakeClock();
  const removed: string[] = [];
  const reasons: string[] = [];
  const recorder = new MemoryEventRecorder();
  const gc = new ImageGcManager({
    images: {
      listImages: () =>
        Promise.resolve({
          images: images
            .filter((i) => !removed.includes(i.id))
            .map((i) => ({
              id: i.id,
              repoTags: i.tags ?? [],
              repoDigests: [],
              size: BigInt(i.size),
              uid: undefined,
              username: '',
              spec: undefined,
              pinned: i.pinned ?? false,
            })),
        }),
      removeImage: (req) => {
        const id = req.image?.image ?? '';
        removed.push(id);
        const image = images.find((i) => i.id === id);
        if (image !== undefined) fs.availableBytes += image.size;
        return Promise.resolve({});
      },
    },
    runtime: {
      listContainers: () =>
        Promise.resolve({
          containers: used.map((image, i) => ({
            id: `c${i}`,
            podSandboxId: 's',
            metadata: undefined,
            image: { image, annotations: {}, userSpecifiedImage: '', runtimeHandler: '' },
            imageRef: '',
            state: 0,
            createdAt: 0n,
            labels: {},
            annotations: {},
            imageId: '',
          })),
        }),
      containerStatus: (req: { containerId: string }) =>
        req.containerId === 'gone'
          ? Promise.reject(new Error('NotFound'))
          : Promise.resolve({
              status: {
                mounts:
                  req.containerId === 'c0'
                    ? volumeImages.map((image) => ({ containerPath: '/v', image: { image } }))
                    : [],
              },
            }),
    } as unknown as ImageGcOptions['runtime'],
    imageFs: () => Promise.resolve({ ...fs }),
    policy: {
      highThresholdPercent: 85,
      lowThresholdPercent: 80,
      minAgeMs: 2 * MINUTE,
      maxAgeMs: 0,
      ...policy,
    },
    clock,
    logger: new MemoryLogger(),
    recorder,
    nodeName: 'n1',
    collected: (r) => reasons.push(r),
  });
  return { gc, clock, removed, reasons, recorder };
}

const signal = new AbortController().signal;

describe('ImageGcManager (upstream realImageGCManager)', () => {
  test('over the high threshold: unused images go, oldest first, down to the low threshold', async () => {
    // 90 % used of 1000: free 200 - 100 = 100 bytes.
    const h = harness(
      [
        { id: 'sha256:old', size: 60 },
        { id: 'sha256:older', size: 60 },
        { id: 'sha256:used', size: 300, tags: ['busybox:1'] },
        { id: 'sha256:pause', size: 10, pinned: true },
        { id: 'sha256:spare', size: 60 },
      ],
      ['busybox:1'],
      { capacityBytes: 1000, availableBytes: 100 },
    );
    // Every image is younger than imageMinimumGCAge: nothing can go, which is a failure.
    await assert.rejects(h.gc.garbageCollect(h.clock.now(), signal), /freed 0 bytes/);
    assert.equal(h.removed.length, 0);
    await h.clock.advance(3 * MINUTE);
    await h.gc.garbageCollect(h.clock.now(), signal);
    assert.equal(h.removed.length, 2);
    assert.ok(!h.removed.includes('sha256:used') && !h.removed.includes('sha256:pause'));
    assert.deepEqual(h.reasons, ['space', 'space']);
  });

  test('an image mounted as an image volume is in use (ContainerStatus mounts)', async () => {
    const h = harness(
      [
        { id: 'sha256:app', size: 100, tags: ['app:1'] },
        { id: 'sha256:data', size: 300 },
        { id: 'sha256:spare', size: 300 },
      ],
      ['app:1'],
      { capacityBytes: 1000, availableBytes: 100 },
      { lowThresholdPercent: 10 },
      ['sha256:data'],
    );
    await assert.rejects(h.gc.garbageCollect(h.clock.now(), signal));
    await h.clock.advance(3 * MINUTE);
    // Down to 10 % is impossible: everything unused goes, the mounted image stays.
    await assert.rejects(h.gc.garbageCollect(h.clock.now(), signal), /freed 300 bytes/);
    assert.deepEqual(h.removed, ['sha256:spare']);
  });

  test('under the high threshold nothing is removed', async () => {
    const h = harness([{ id: 'a', size: 10 }], [], { capacityBytes: 1000, availableBytes: 500 });
    await h.clock.advance(3 * MINUTE);
    await h.gc.garbageCollect(h.clock.now(), signal);
    assert.deepEqual(h.removed, []);
  });

  test('not enough to free: FreeDiskSpaceFailed with upstream message', async () => {
    const h = harness([{ id: 'a', size: 10 }], [], { capacityBytes: 1024, availableBytes: 24 });
    await h.gc.garbageCollect(h.clock.now(), signal).catch(() => undefined);
    await h.clock.advance(3 * MINUTE);
    await assert.rejects(
      h.gc.garbageCollect(h.clock.now(), signal),
      /Insufficient free disk space/,
    );
    const e = h.recorder.events.findLast((x) => x.reason === 'FreeDiskSpaceFailed');
    assert.equal(
      e?.message,
      "Insufficient free disk space on the node's image filesystem (98% of 1.0 KiB used). " +
        'Failed to free sufficient space by deleting unused images (freed 10 bytes). ' +
        'Investigate disk usage, as it could be used by active images, logs, volumes, or other data.',
    );
  });

  test('imageMaximumGCAge removes images unused for longer, whatever the usage', async () => {
    const h = harness(
      [
        { id: 'a', size: 10 },
        { id: 'b', size: 10, tags: ['b:1'] },
      ],
      ['b:1'],
      { capacityBytes: 1000, availableBytes: 900 },
      { maxAgeMs: 10 * MINUTE },
    );
    const began = h.clock.now();
    await h.gc.garbageCollect(began, signal);
    await h.clock.advance(11 * MINUTE);
    await h.gc.garbageCollect(began, signal);
    assert.deepEqual(h.removed, ['a']);
    assert.deepEqual(h.reasons, ['age']);
  });

  test('deleteUnusedImages removes every unused, unpinned image old enough', async () => {
    const h = harness(
      [
        { id: 'a', size: 10 },
        { id: 'b', size: 10 },
        { id: 'p', size: 10, pinned: true },
      ],
      [],
      { capacityBytes: 1000, availableBytes: 900 },
    );
    await h.gc.deleteUnusedImages(signal);
    assert.deepEqual(h.removed, []);
    await h.clock.advance(3 * MINUTE);
    await h.gc.deleteUnusedImages(signal);
    assert.deepEqual(h.removed.sort(), ['a', 'b']);
  });
});
