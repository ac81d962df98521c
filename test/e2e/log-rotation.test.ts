/**
 * Container log rotation (issue #7 item 5) on a real containerd 2.x node: berth rotates
 * a fast-writing container's log at containerLogMaxSize through CRI ReopenContainerLog,
 * keeps at most containerLogMaxFiles files, and `kubectl logs -f` (the real kubectl
 * through the API server) follows across the rotations without losing or repeating a
 * line. The container prints consecutive integers, so a gap or a duplicate shows. Its log
 * is linked in the node's /var/log/containers as upstream links it, until the pod goes.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getPod,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';

const MAX_FILES = 3;

describe('container log rotation on containerd2', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let follower: ChildProcess | undefined;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster, {
      extraConfig: [
        'containerLogMaxSize: 1Mi',
        `containerLogMaxFiles: ${MAX_FILES}`,
        // The smallest interval upstream's validation accepts.
        'containerLogMonitorInterval: 3s',
      ],
    });
    await applyJson(
      cluster,
      busyboxPod(cluster, 'rot', berth.nodeName, {
        command: [
          'sh',
          '-c',
          // About 20 000 lines (~1 MB of CRI records) a second: a rotation every check.
          'n=0; while :; do seq $n $((n+1999)); n=$((n+2000)); sleep 0.1; done',
        ],
      }),
    );
    await waitForPod(cluster, 'default', 'rot', 'running', isRunningAndReady, 90_000);
  });

  after(async () => {
    follower?.kill('SIGKILL');
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('kubectl logs -f follows across rotations with no gap and no duplicate', async () => {
    const pod = await getPod(cluster, 'default', 'rot');
    const uid = pod?.metadata?.uid ?? assert.fail('no pod UID');
    const logDir = join(berth.dir, 'pod-logs', `default_rot_${uid}`, 'main');

    const child = spawn(
      cluster.bin.kubectl,
      ['--kubeconfig', cluster.adminKubeconfig, 'logs', '-f', 'rot'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    follower = child;
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));

    // Watch the directory: every rotated name seen, and never more than MAX_FILES files.
    const rotated = new Set<string>();
    let most = 0;
    await eventually(
      'two rotations while following',
      async () => {
        const names = await readdir(logDir);
        most = Math.max(most, names.length);
        for (const n of names)
          if (/^0\.log\.\d{8}-\d{6}(\.gz)?$/.test(n)) rotated.add(n.replace(/\.gz$/, ''));
        return rotated.size >= 3 ? true : undefined;
      },
      120_000,
      100,
    );
    assert.equal(child.exitCode, null, `kubectl logs -f ended early: ${err}`);
    // The follower is past the last rotation once it printed a line the live file holds
    // (a CRI record: time, stream, tag, then the text).
    const live = (await readFile(join(logDir, '0.log'), 'utf8')).split('\n', 1)[0] ?? '';
    const firstLive = Number(live.split(' ').slice(3).join(' '));
    assert.ok(Number.isInteger(firstLive), `not a number in 0.log: ${live}`);
    await eventually(
      'the follower reading the live file',
      () => {
        const complete = out.slice(0, out.lastIndexOf('\n'));
        const last = Number(complete.slice(complete.lastIndexOf('\n') + 1));
        return Promise.resolve(last >= firstLive ? true : undefined);
      },
      60_000,
      100,
    );
    child.kill('SIGTERM');
    follower = undefined;

    assert.ok(most <= MAX_FILES, `the log directory held ${most} files`);
    // Compression of older rotated files is checked by the unit tests only: in CI the
    // directory held no .gz at this point (open, see the issue note).
    const lines = out.slice(0, out.lastIndexOf('\n')).split('\n');
    const numbers = lines.map(Number);
    // Three rotations seen: at least two whole 1 MiB files (~25 000 records each) went by.
    assert.ok(numbers.length > 40_000, `followed only ${numbers.length} lines`);
    assert.ok(Number.isInteger(numbers[0]), `not a number: ${lines[0] ?? ''}`);
    for (let i = 1; i < numbers.length; i++) {
      if (numbers[i] !== (numbers[i - 1] ?? 0) + 1)
        assert.fail(`line ${i}: ${String(numbers[i - 1])} then ${String(numbers[i])}`);
    }
  });

  test('kubectl logs without -f reads the rotated files then the live one, in order', async () => {
    const stdout = await cluster.kubectl(['logs', 'rot']);
    const numbers = stdout.trimEnd().split('\n').map(Number);
    for (let i = 1; i < numbers.length; i++) {
      if (numbers[i] !== (numbers[i - 1] ?? 0) + 1)
        assert.fail(`line ${i}: ${String(numbers[i - 1])} then ${String(numbers[i])}`);
    }
    const tail = await cluster.kubectl(['logs', 'rot', '--tail', '5']);
    assert.equal(tail.trimEnd().split('\n').length, 5);
  });

  test("the container log is linked in /var/log/containers (the node's), the link goes with the pod", async () => {
    const pod = await getPod(cluster, 'default', 'rot');
    const uid = pod?.metadata?.uid ?? assert.fail('no pod UID');
    const id = (pod?.status?.containerStatuses?.[0]?.containerID ?? '').replace(/^\w+:\/\//, '');
    assert.notEqual(id, '');
    // Upstream's name: <pod>_<namespace>_<container>-<container ID>.log.
    const link = join(berth.containerLogSymlinkDir, `rot_default_main-${id}.log`);
    assert.deepEqual(await readdir(berth.containerLogSymlinkDir), [`rot_default_main-${id}.log`]);
    assert.equal(
      await readlink(link),
      join(berth.dir, 'pod-logs', `default_rot_${uid}`, 'main', '0.log'),
    );
    // Past the rotations it still reaches the live log: a CRI record of the counter.
    const first = (await readFile(link, 'utf8')).split('\n', 1)[0] ?? '';
    assert.match(first, /^\S+ stdout F \d+$/);
    await cluster.kubectl(['delete', 'pod', 'rot', '--wait=true', '--timeout=120s']);
    await eventually(
      'the link removed with the container',
      async () => ((await readdir(berth.containerLogSymlinkDir)).length === 0 ? true : undefined),
      60_000,
    );
  });
});
