/** The VolumeManager contract against the host manager and the fake. */
import type { Pod, Volume } from 'kubernetes-types/core/v1.js';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { volumeManagerContract } from './contract.ts';
import { FakeVolumeManager } from './fake.ts';
import { HostVolumeManager, PLUGIN } from './manager.ts';
import { SystemMounter } from './mounter.ts';
import type { ResolvedPayload, VolumeSourceResolver } from './types.ts';

/** configMap volumes get one file; nothing else is a content volume here. */
const sources: VolumeSourceResolver = {
  payload(_pod: Pod, v: Volume): Promise<ResolvedPayload | undefined> {
    if (v.configMap === undefined) return Promise.resolve(undefined);
    const payload = new Map([['key', { data: Buffer.from('v'), mode: 0o644 }]]);
    return Promise.resolve({ payload, medium: 'disk', plugin: PLUGIN.configMap });
  },
};

async function tempDirs(): Promise<{ base: string; rootDir: string; hostDir: string }> {
  const base = await mkdtemp(path.join(tmpdir(), 'berth-vm-contract-'));
  const rootDir = path.join(base, 'kubelet');
  const hostDir = path.join(base, 'host');
  await mkdir(hostDir);
  return { base, rootDir, hostDir };
}

volumeManagerContract('HostVolumeManager (temp dirs, SystemMounter)', async () => {
  const { base, rootDir, hostDir } = await tempDirs();
  const mounter = new SystemMounter();
  const vm = new HostVolumeManager({
    rootDir,
    mounter,
    sources,
    logger: new MemoryLogger(),
    clock: new FakeClock(),
  });
  return {
    vm,
    rootDir,
    hostDir,
    dispose: async () => {
      for (const e of await mounter.listMountsUnder(base))
        await mounter.unmount(e.mountPoint).catch(() => undefined);
      await rm(base, { recursive: true, force: true });
    },
  };
});

volumeManagerContract('FakeVolumeManager', async () => {
  const { base, rootDir, hostDir } = await tempDirs();
  return {
    vm: new FakeVolumeManager({ rootDir }),
    rootDir,
    hostDir,
    dispose: () => rm(base, { recursive: true, force: true }),
  };
});
