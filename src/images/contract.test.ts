/** The ImageEnsurer contract against the image manager over the fake CRI and the fake. */
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { Backoff } from '../util/backoff.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { imageEnsurerContract } from './contract.ts';
import { FakeImageManager } from './fake.ts';
import { ImageManager } from './manager.ts';

imageEnsurerContract('ImageManager (fake CRI image service)', () => {
  const clock = new FakeClock();
  const fake = new FakeCriClient({ flavor: 'containerd2', clock });
  const recorder = new MemoryEventRecorder();
  const images = new ImageManager({
    images: fake.image,
    recorder,
    clock,
    logger: new MemoryLogger(),
    backoff: new Backoff(clock, { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 }),
    maxParallelPulls: 1,
  });
  return {
    images,
    recorder,
    clock,
    addPresent: (ref) => fake.addImage(ref, { preloaded: true }),
    addPullable: (ref) => fake.addImage(ref),
  };
});

imageEnsurerContract('FakeImageManager', () => {
  const clock = new FakeClock();
  const recorder = new MemoryEventRecorder();
  const images = new FakeImageManager({ clock, recorder });
  return {
    images,
    recorder,
    clock,
    addPresent: (ref) => images.present.add(ref),
    addPullable: (ref) => images.pullable.add(ref),
  };
});
