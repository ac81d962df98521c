/** The ContainerLogManager contract against the CRI log manager and the fake. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { containerLogManagerContract } from './contract.ts';
import { FakeContainerLogManager } from './fake.ts';
import { CriContainerLogManager, logRotatePolicy } from './manager.ts';

containerLogManagerContract('CriContainerLogManager (fake CRI, temp dir, fake clock)', async () => {
  const clock = new FakeClock();
  const podLogsDir = await mkdtemp(join(tmpdir(), 'berth-logs-contract-'));
  const manager = new CriContainerLogManager(
    logRotatePolicy({
      containerLogMaxSize: '10Mi',
      containerLogMaxFiles: 5,
      containerLogMaxWorkers: 1,
      containerLogMonitorIntervalMs: 10_000,
    }),
    { cri: new FakeCriClient({ clock }), clock, logger: new MemoryLogger(), podLogsDir },
  );
  return { manager, dispose: () => rm(podLogsDir, { recursive: true, force: true }) };
});

containerLogManagerContract('FakeContainerLogManager', () =>
  Promise.resolve({ manager: new FakeContainerLogManager(), dispose: () => Promise.resolve() }),
);
