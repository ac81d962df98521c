// The golden snapshot of the VM test tier: boots the freshly built disk once, waits for
// systemd to settle, then stops the machine and saves its whole state (RAM, devices) to
// golden.state with QEMU's migration to a file. Guests then resume from that state over a
// per-VM overlay of base.qcow2 in seconds instead of a cold boot of about a minute.
//
// An external state file rather than savevm: savevm stores the snapshot inside the
// qcow2 it was taken on, and a guest's overlay would not carry it.
//
// Usage: node hack/vm/golden.ts <image-dir>   (hack/vm/build-image.sh runs it)
import { spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPO_ROOT, cacheDir } from '../../test/harness/binaries.ts';
import { freePort } from '../../test/harness/net.ts';
import { Qmp, qemuArgs, sshRun, waitForSsh } from '../../test/harness/vm-qemu.ts';

const image = process.argv[2];
if (image === undefined) throw new Error('usage: node hack/vm/golden.ts <image-dir>');
const qmpSocket = join(image, 'golden.qmp');
const consoleLog = join(image, 'golden-console.log');
const sshPort = await freePort();
const out = openSync(join(image, 'golden-qemu.log'), 'w');
const qemu = spawn(
  'qemu-system-x86_64',
  qemuArgs({
    image,
    disk: join(image, 'base.qcow2'),
    sshPort,
    qmpSocket,
    consoleLog,
    repoRoot: REPO_ROOT,
    cacheRoot: cacheDir(),
  }),
  { stdio: ['ignore', out, out] },
);
closeSync(out);
const exited = new Promise<number | null>((resolve) => qemu.once('exit', resolve));
try {
  const t0 = Date.now();
  await waitForSsh(image, sshPort, 1_200_000);
  console.error(`golden: ssh after ${Math.round((Date.now() - t0) / 1000)} s`);
  // "degraded" is fine (a unit that wants hardware a VM lacks); wait for the jobs to end.
  await sshRun(image, sshPort, 'systemctl is-system-running --wait || true', {
    timeoutMs: 600_000,
  });
  await sshRun(
    image,
    sshPort,
    'systemctl --failed --no-legend; sync; echo 3 > /proc/sys/vm/drop_caches',
  );
  await sleep(2000);
  const qmp = await Qmp.open(qmpSocket);
  await qmp.command('stop');
  const tmp = join(image, 'golden.state.tmp');
  await qmp.command('migrate', { uri: `exec:cat > ${tmp}` });
  for (;;) {
    const info = (await qmp.command('query-migrate')) as { status?: string };
    if (info.status === 'completed') break;
    if (info.status === 'failed' || info.status === 'cancelled')
      throw new Error(`golden: saving the machine failed (${JSON.stringify(info)})`);
    await sleep(500);
  }
  await qmp.command('quit').catch(() => undefined);
  qmp.close();
  await exited;
  await rename(tmp, join(image, 'golden.state'));
  await rm(qmpSocket, { force: true });
  console.error(`golden: saved after ${Math.round((Date.now() - t0) / 1000)} s`);
} catch (err) {
  qemu.kill('SIGKILL');
  throw err;
}
