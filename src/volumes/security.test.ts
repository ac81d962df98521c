/**
 * Path-escape tests from the kubelet's CVE history: whatever a pod spec or a container
 * plants, a host canary outside the volume is neither read, changed nor deleted.
 */
import assert from 'node:assert/strict';
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Container, Pod, Volume } from 'kubernetes-types/core/v1.js';
import { MemoryLogger } from '../util/logger.ts';
import { HostVolumeManager, PLUGIN } from './manager.ts';
import { SystemMounter, type BindOptions, type Mounter } from './mounter.ts';
import {
  VolumeError,
  type PodVolumes,
  type ResolvedPayload,
  type VolumeSourceResolver,
} from './types.ts';

const signal = new AbortController().signal;

/** Runs `beforeBind` between the subPath resolution and the bind: the swap race. */
class RacingMounter extends SystemMounter {
  beforeBind: (() => Promise<void>) | undefined;
  override async bindMount(
    source: string,
    target: string,
    options: BindOptions,
    sig?: AbortSignal,
  ): Promise<void> {
    const f = this.beforeBind;
    this.beforeBind = undefined;
    if (f !== undefined) await f();
    await super.bindMount(source, target, options, sig);
  }
}

class EvilSources implements VolumeSourceResolver {
  payload(_pod: Pod, v: Volume): Promise<ResolvedPayload | undefined> {
    if (v.configMap === undefined) return Promise.resolve(undefined);
    const payload = new Map([
      ['ok', { data: Buffer.from('fine'), mode: 0o644 }],
      ['../../../canary/canary-file', { data: Buffer.from('owned'), mode: 0o644 }],
    ]);
    return Promise.resolve({ payload, medium: 'disk', plugin: PLUGIN.configMap });
  }
}

function pod(uid: string, volumes: Volume[]): Pod {
  return { metadata: { name: 'p', namespace: 'ns', uid }, spec: { volumes, containers: [] } };
}

function escapeError(err: unknown): boolean {
  assert.ok(err instanceof VolumeError, String(err));
  assert.equal(err.code, 'BERTH_VOLUME_PATH_ESCAPE');
  return true;
}

async function unmountAll(m: Mounter, dir: string): Promise<void> {
  for (const e of await m.listMountsUnder(dir))
    await m.unmount(e.mountPoint).catch(() => undefined);
}

describe('volume path safety', () => {
  let base = '';
  let rootDir = '';
  let canary = '';
  let canaryFile = '';
  let mounter: RacingMounter;
  let vm: HostVolumeManager;
  let pv: PodVolumes;
  let scratch = '';
  const mountIn = (subPath: string, name = 'scratch'): Container => ({
    name: 'c',
    volumeMounts: [{ name, mountPath: '/m', subPath }],
  });

  /** The canary is untouched: same content, same mtime, and (relatime) not read. */
  async function assertCanaryIntact(): Promise<void> {
    assert.deepEqual((await readdir(canary)).sort(), ['canary-file', 'sub']);
    const st = await stat(canaryFile);
    assert.equal(st.mtimeMs, 1_000_000_000_000);
    assert.equal(st.size, 'secret host data'.length);
    assert.equal(st.atimeMs, 900_000_000_000, 'the canary was read');
    assert.equal((await readdir(path.join(canary, 'sub'))).length, 1);
  }

  beforeEach(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'berth-sec-'));
    rootDir = path.join(base, 'kubelet');
    canary = path.join(base, 'canary');
    canaryFile = path.join(canary, 'canary-file');
    await mkdir(path.join(canary, 'sub'), { recursive: true });
    await writeFile(path.join(canary, 'sub', 'x'), 'x');
    await writeFile(canaryFile, 'secret host data');
    // atime older than mtime: under relatime any read of the file would update it.
    await utimes(canaryFile, 900_000_000, 1_000_000_000);
    mounter = new RacingMounter();
    vm = new HostVolumeManager({
      rootDir,
      mounter,
      sources: new EvilSources(),
      logger: new MemoryLogger(),
    });
    pv = await vm.setUpPod(pod('uid', [{ name: 'scratch', emptyDir: {} }]), signal);
    scratch = pv.byName.get('scratch')?.hostPath ?? '';
  });
  afterEach(async () => {
    await unmountAll(new SystemMounter(), base);
    await rm(base, { recursive: true, force: true });
  });

  it('refuses subPath ../../etc and an absolute subPath without mounting anything', async () => {
    const p = pod('uid', []);
    for (const sub of ['../../etc', 'a/../../..', canary, '/etc']) {
      await assert.rejects(
        vm.containerMounts(p, mountIn(sub), pv, new Map(), signal),
        escapeError,
        sub,
      );
    }
    // subPathExpr is checked after expansion: a variable cannot smuggle in `..`.
    const expr: Container = {
      name: 'c',
      volumeMounts: [{ name: 'scratch', mountPath: '/m', subPathExpr: '$(X)/etc' }],
    };
    await assert.rejects(
      vm.containerMounts(p, expr, pv, new Map([['X', '../..']]), signal),
      escapeError,
    );
    assert.deepEqual(await mounter.listMountsUnder(rootDir), []);
    await assertCanaryIntact();
  });

  it('refuses a container-planted symlink to a host dir used as subPath', async () => {
    // What a container would do in its emptyDir: ln -s <host path> link.
    await symlink(canary, path.join(scratch, 'abs-link'));
    await symlink('../../../../../canary', path.join(scratch, 'rel-link'));
    await mkdir(path.join(scratch, 'd'));
    await symlink('../rel-link', path.join(scratch, 'd', 'chain'));
    const p = pod('uid', []);
    for (const sub of ['abs-link', 'abs-link/sub', 'rel-link', 'd/chain/sub', 'abs-link/new-dir']) {
      await assert.rejects(
        vm.containerMounts(p, mountIn(sub), pv, new Map(), signal),
        escapeError,
        sub,
      );
    }
    assert.deepEqual(await mounter.listMountsUnder(rootDir), []);
    await assertCanaryIntact();
  });

  it('binds the checked directory even when a symlink is swapped in before the mount', async () => {
    await mkdir(path.join(scratch, 'data'));
    await writeFile(path.join(scratch, 'data', 'mine'), 'volume file');
    mounter.beforeBind = async () => {
      await rename(path.join(scratch, 'data'), path.join(scratch, 'moved'));
      await symlink(canary, path.join(scratch, 'data'));
    };
    const [m] = await vm.containerMounts(pod('uid', []), mountIn('data'), pv, new Map(), signal);
    assert.ok(m !== undefined);
    assert.equal(mounter.beforeBind, undefined, 'the race hook ran');
    assert.deepEqual(await readdir(m.hostPath), ['mine']);
    await writeFile(path.join(m.hostPath, 'written'), 'x');
    assert.equal(await readFile(path.join(scratch, 'moved', 'written'), 'utf8'), 'x');
    await vm.tearDownPod('uid', signal);
    await assertCanaryIntact();
  });

  it('refuses an items path with .. and writes nothing outside the volume', async () => {
    await assert.rejects(
      vm.setUpPod(pod('uid', [{ name: 'cfg', configMap: { name: 'c' } }]), signal),
      escapeError,
    );
    const dir = path.join(rootDir, 'pods/uid/volumes/kubernetes.io~configmap/cfg');
    assert.deepEqual(await readdir(dir), []);
    await assertCanaryIntact();
  });

  it('tears down a volume holding a symlink to the canary and a bind of a host dir', async () => {
    await symlink(canaryFile, path.join(scratch, 'file-link'));
    await symlink(canary, path.join(scratch, 'dir-link'));
    const bindTarget = path.join(scratch, 'nested', 'hostdir');
    await mkdir(bindTarget, { recursive: true });
    await mounter.bindMount(canary, bindTarget, { readOnly: false });
    await vm.tearDownPod('uid', signal);
    assert.deepEqual(await mounter.listMountsUnder(rootDir), []);
    await assert.rejects(lstat(path.join(rootDir, 'pods', 'uid')), { code: 'ENOENT' });
    assert.equal(await readFile(path.join(canary, 'sub', 'x'), 'utf8'), 'x');
    await assertCanaryIntact();
  });
});
