/** A prober manager over the fake CRI runtime and a fake clock, for the manager's tests. */
import type { Container, Probe } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import type { RuntimePodStatus } from '../container/pod-status.ts';
import { instance, runtimeStatus, sandbox, testPod } from '../container/testing.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { ProberManager, type ProberMetrics } from './manager.ts';

export const IMAGE = 'registry.test/main:1';
const silent = new MemoryLogger();

/** Lets the fake runtime answer and the worker apply the result. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
}

export interface Harness {
  readonly fake: FakeCriClient;
  readonly clock: FakeClock;
  readonly recorder: MemoryEventRecorder;
  readonly prober: ProberManager;
  readonly changes: string[];
  /** Exec commands in the order the runtime saw them, with the fake time. */
  readonly execs: { cmd: string; at: number }[];
  /** Starts a container in the fake runtime and returns its id. */
  run(name?: string): Promise<string>;
  /** Runtime state with the given running instances (started now). */
  state(
    ...running: { name: string; id: string; attempt?: number; from: Container }[]
  ): RuntimePodStatus;
}

const probers: ProberManager[] = [];

/** Stops every manager `harness` made (each test file calls it after each test). */
export async function stopProbers(): Promise<void> {
  await Promise.all(probers.splice(0).map((p) => p.stop()));
}

export async function harness(
  exitCodes: (cmd: string) => number = () => 0,
  random = 0,
  metrics?: ProberMetrics,
): Promise<Harness> {
  const fake = new FakeCriClient();
  const clock = new FakeClock();
  const recorder = new MemoryEventRecorder();
  const changes: string[] = [];
  const execs: { cmd: string; at: number }[] = [];
  fake.addImage(IMAGE, { preloaded: true });
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name: 'web', uid: 'uid-1', namespace: 'default' },
    logDirectory: '/var/log/pods/x',
  });
  const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
  fake.onExec((_c, cmd) => {
    const line = cmd.join(' ');
    execs.push({ cmd: line, at: clock.now() });
    const exitCode = exitCodes(line);
    return { exitCode, stdout: exitCode === 0 ? '' : `${line} failed` };
  });
  const prober = new ProberManager({
    runtime: fake.runtime,
    clock,
    recorder,
    logger: silent,
    onChange: (uid) => changes.push(uid),
    random: () => random,
    ...(metrics !== undefined && { metrics }),
  });
  probers.push(prober);
  // Every test's pod is testPod()'s UID; the sync loop adds a pod before it is synced.
  prober.addPod(testPod());
  let n = 0;
  return {
    fake,
    clock,
    recorder,
    prober,
    changes,
    execs,
    run: async (name = 'main') => {
      const { containerId } = await fake.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: { metadata: { name, attempt: n++ }, image: { image: IMAGE }, logPath: 'x.log' },
      });
      await fake.runtime.startContainer({ containerId });
      return containerId;
    },
    state: (...running) =>
      runtimeStatus(
        [sandbox()],
        running.map((r) => ({
          ...instance(r.name, 'running', { id: r.id, attempt: r.attempt ?? 0, from: r.from }),
          startedAt: clock.now(),
        })),
      ),
  };
}

export const execProbe = (cmd: string, extra: Partial<Probe> = {}): Probe => ({
  exec: { command: [cmd] },
  periodSeconds: 1,
  ...extra,
});
