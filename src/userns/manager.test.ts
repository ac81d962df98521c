import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { MemoryLogger } from '../util/logger.ts';
import { userNamespaceManagerContract, type UsernsSetup } from './contract.ts';
import { FakeUserNamespaceManager } from './fake.ts';
import { diskUsernsHost } from './host.ts';
import { UsernsManager } from './manager.ts';
import type { UsernsHost } from './types.ts';

const roots: string[] = [];
after(async () => {
  for (const r of roots) await rm(r, { recursive: true, force: true });
});

async function tempRoot(): Promise<string> {
  const r = await mkdtemp(join(tmpdir(), 'berth-userns-'));
  roots.push(r);
  return r;
}

function host(rootDir: string, setup: UsernsSetup): UsernsHost {
  const runtimeHandlers = Object.entries(setup.handlers).map(([name, userNamespaces]) => ({
    name,
    features: { userNamespaces, recursiveReadOnlyMounts: false },
  }));
  const runtime = {
    status: () => Promise.resolve(cri.StatusResponse.fromPartial({ runtimeHandlers })),
  };
  const disk = diskUsernsHost({ rootDir, runtime, maxPods: setup.maxPods ?? 110 });
  const mappings = setup.mappings;
  return mappings === undefined
    ? disk
    : { ...disk, kubeletMappings: () => Promise.resolve(mappings) };
}

userNamespaceManagerContract('on disk', async (setup) => {
  const rootDir = await tempRoot();
  return {
    manager: new UsernsManager({ host: host(rootDir, setup), logger: new MemoryLogger() }),
    removePodDir: (uid) => rm(join(rootDir, 'pods', uid), { recursive: true, force: true }),
  };
});

userNamespaceManagerContract('fake', (setup) => {
  const manager = new FakeUserNamespaceManager(setup);
  return Promise.resolve({
    manager,
    removePodDir: (uid) => {
      manager.removePodDir(uid);
      return Promise.resolve();
    },
  });
});

const signal = new AbortController().signal;
const userns = (uid: string): Pod => ({
  metadata: { name: uid, namespace: 'default', uid },
  spec: { containers: [{ name: 'c' }], hostUsers: false },
});

describe('the user namespace manager on disk', () => {
  test("writes upstream's file in the pod directory and removes it on release", async () => {
    const rootDir = await tempRoot();
    const m = new UsernsManager({
      host: host(rootDir, { handlers: { '': true } }),
      logger: new MemoryLogger(),
      random: () => 0,
    });
    await m.getOrCreateUserNamespaceMappings(userns('a'), '', signal);
    const file = join(rootDir, 'pods', 'a', 'userns');
    assert.equal(
      await readFile(file, 'utf8'),
      '{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}',
    );
    // No temporary file is left behind.
    assert.deepEqual(await readdir(join(rootDir, 'pods', 'a')), ['userns']);
    await m.release('a');
    await assert.rejects(readFile(file), { code: 'ENOENT' });
  });

  test('a restarted manager keeps each pod its range and hands out others', async () => {
    const rootDir = await tempRoot();
    const setup = { handlers: { '': true } };
    const first = new UsernsManager({ host: host(rootDir, setup), logger: new MemoryLogger() });
    const a = await first.getOrCreateUserNamespaceMappings(userns('a'), '', signal);
    // The next start would pick a's range first, were it not recorded.
    const restarted = new UsernsManager({
      host: host(rootDir, setup),
      logger: new MemoryLogger(),
      random: () => ((a.uids[0]?.hostId ?? 0) / 65536 - 1) / 65535,
    });
    const b = await restarted.getOrCreateUserNamespaceMappings(userns('b'), '', signal);
    assert.notEqual(b.uids[0]?.hostId, a.uids[0]?.hostId);
    assert.equal(restarted.allocated('a'), a.uids[0]?.hostId);
    assert.deepEqual(await restarted.getOrCreateUserNamespaceMappings(userns('a'), '', signal), a);
  });

  test('a file it cannot use fails its pod with the reason and leaves the others working', async () => {
    const rootDir = await tempRoot();
    const bad = {
      broken: ['{"uidMappings":', /^user namespace: invalid user namespace mappings file: /],
      two: [
        '{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536},{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[]}',
        'user namespace: invalid user namespace configuration: no more than one mapping allowed.',
      ],
      rootless: [
        '{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}',
        'user namespace: invalid user namespace configuration: UID 0 must be mapped',
      ],
      short: [
        '{"uidMappings":[{"hostId":65536,"containerId":0,"length":4096}],"gidMappings":[{"hostId":65536,"containerId":0,"length":4096}]}',
        'user namespace: wrong user namespace length 4096',
      ],
      root: [
        '{"uidMappings":[{"hostId":0,"containerId":0,"length":65536}],"gidMappings":[{"hostId":0,"containerId":0,"length":65536}]}',
        'user namespace: id 0 is out of range',
      ],
    } as const;
    for (const [uid, [content]] of Object.entries(bad)) {
      await mkdir(join(rootDir, 'pods', uid), { recursive: true });
      await writeFile(join(rootDir, 'pods', uid, 'userns'), content);
    }
    const logger = new MemoryLogger();
    const m = new UsernsManager({ host: host(rootDir, { handlers: { '': true } }), logger });
    const ok = await m.getOrCreateUserNamespaceMappings(userns('fine'), '', signal);
    assert.equal(ok.mode, cri.NamespaceMode.POD);
    for (const [uid, [, message]] of Object.entries(bad))
      await assert.rejects(m.getOrCreateUserNamespaceMappings(userns(uid), '', signal), {
        code: 'BERTH_USERNS',
        message,
      });
    assert.equal(
      logger.records.filter((r) => r.msg === 'Cannot record the user namespace of an existing pod')
        .length,
      Object.keys(bad).length,
    );
  });

  test('the CRI Status is asked for the handler of each hostUsers false pod only', async () => {
    const rootDir = await tempRoot();
    let asked = 0;
    const runtime = {
      status: () => {
        asked++;
        return Promise.resolve(
          cri.StatusResponse.fromPartial({
            runtimeHandlers: [{ name: '', features: { userNamespaces: true } }],
          }),
        );
      },
    };
    const m = new UsernsManager({
      host: diskUsernsHost({ rootDir, runtime, maxPods: 110 }),
      logger: new MemoryLogger(),
    });
    await m.getOrCreateUserNamespaceMappings(
      { ...userns('n'), spec: { containers: [] } },
      '',
      signal,
    );
    assert.equal(asked, 0);
    await m.getOrCreateUserNamespaceMappings(userns('u'), '', signal);
    assert.equal(asked, 1);
  });

  test('housekeeping costs nothing until a hostUsers false pod has loaded the ranges', async () => {
    const rootDir = await tempRoot();
    const disk = host(rootDir, { handlers: { '': true } });
    let listed = 0;
    const counting: UsernsHost = {
      ...disk,
      listPodsFromDisk: () => {
        listed++;
        return disk.listPodsFromDisk();
      },
    };
    const m = new UsernsManager({ host: counting, logger: new MemoryLogger() });
    await m.cleanupOrphanedPodUsernsAllocations(new Set(), signal);
    await m.release('gone');
    assert.equal(listed, 0);
    await m.getOrCreateUserNamespaceMappings(userns('a'), '', signal);
    assert.equal(listed, 1, 'the load');
    await m.cleanupOrphanedPodUsernsAllocations(new Set(['a']), signal);
    assert.equal(listed, 2);
    assert.notEqual(m.allocated('a'), undefined);
  });
});
