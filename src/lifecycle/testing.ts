/**
 * Test helpers for the lifecycle tests: a fake CRI runtime with one running container
 * in a sandbox, a fake clock, an event recorder and a HandlerRunner over them. Not used
 * by production code.
 */
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { HandlerRunner } from './handler.ts';

const IMAGE = 'registry.test/main:1';

export interface LifecycleHarness {
  readonly fake: FakeCriClient;
  readonly clock: FakeClock;
  readonly recorder: MemoryEventRecorder;
  readonly logger: MemoryLogger;
  readonly runner: HandlerRunner;
  /** A running container's id. */
  readonly containerId: string;
}

export async function lifecycleHarness(podIP = '127.0.0.1'): Promise<LifecycleHarness> {
  const clock = new FakeClock();
  const fake = new FakeCriClient({ clock });
  const recorder = new MemoryEventRecorder();
  const logger = new MemoryLogger();
  fake.addImage(IMAGE, { preloaded: true });
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name: 'web', uid: 'uid-1', namespace: 'default' },
    logDirectory: '/var/log/pods/x',
  });
  const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
  const { containerId } = await fake.runtime.createContainer({
    podSandboxId,
    sandboxConfig: config,
    config: { metadata: { name: 'main', attempt: 0 }, image: { image: IMAGE }, logPath: 'x.log' },
  });
  await fake.runtime.startContainer({ containerId });
  const runner = new HandlerRunner({
    runtime: fake.runtime,
    recorder,
    clock,
    logger,
    podIP: () => Promise.resolve(podIP),
  });
  return { fake, clock, recorder, logger, runner, containerId };
}

/** Lets pending promise chains (fake CRI answers, handlers) run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
}
