/** The ProbeManager contract against ProberManager (exec probes on the fake CRI) and the fake. */
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { proberContract } from './contract.ts';
import { FakeProberManager } from './fake.ts';
import { ProberManager } from './manager.ts';
import type { ProbeResult } from './types.ts';

const START = Date.UTC(2026, 0, 1);

async function turns(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
}

proberContract('ProberManager (fake CRI)', () => {
  const clock = new FakeClock(START);
  const fake = new FakeCriClient({ clock });
  const changes: string[] = [];
  const outcomes = new Map<string, ProbeResult>();
  // Probes of a command with no outcome yet wait (as a probe still running would).
  const waiting = new Map<string, (() => void)[]>();
  fake.addImage('registry.test/app:1', { preloaded: true });
  fake.addImage('registry.test/plain:1', { preloaded: true });
  fake.onExec(async (_c, cmd) => {
    const key = cmd.join('/');
    while (!outcomes.has(key)) {
      await new Promise<void>((r) => waiting.set(key, [...(waiting.get(key) ?? []), r]));
    }
    return { exitCode: outcomes.get(key) === 'success' ? 0 : 1 };
  });
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name: 'web', uid: 'uid-1', namespace: 'default' },
    logDirectory: '/var/log/pods/x',
  });
  const sandbox = fake.runtime.runPodSandbox({ config });
  let attempt = 0;
  const prober = new ProberManager({
    runtime: fake.runtime,
    clock,
    recorder: new MemoryEventRecorder(),
    logger: new MemoryLogger(),
    onChange: (uid) => changes.push(uid),
    random: () => 0,
  });
  return {
    prober,
    clock,
    changes,
    start: async (name) => {
      const { podSandboxId } = await sandbox;
      const { containerId } = await fake.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: {
          metadata: { name, attempt: attempt++ },
          image: { image: `registry.test/${name}:1` },
          logPath: `${name}.log`,
        },
      });
      await fake.runtime.startContainer({ containerId });
      return containerId;
    },
    answer: async (name, kind, result) => {
      const key = `${name}/${kind}`;
      outcomes.set(key, result);
      for (const wake of waiting.get(key)?.splice(0) ?? []) wake();
      await turns();
      await clock.advance(1000);
      await turns();
    },
    settle: turns,
  };
});

proberContract('FakeProberManager', () => {
  const clock = new FakeClock(START);
  const changes: string[] = [];
  const prober = new FakeProberManager({ clock, onChange: (uid) => changes.push(uid) });
  let n = 0;
  return {
    prober,
    clock,
    changes,
    start: (name) => Promise.resolve(`${name}-${String(n++)}`),
    answer: (name, kind, result) => {
      prober.setOutcome('uid-1', name, kind, result);
      return Promise.resolve();
    },
    settle: () => Promise.resolve(),
  };
});
