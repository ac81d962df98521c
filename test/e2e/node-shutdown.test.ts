/**
 * Graceful node shutdown (issue #30, part 3) against a real systemd-logind on a private
 * system bus (test/harness/logind.ts): berth holds a delay inhibitor lock; on
 * PrepareForShutdown(true), sent with dbus-send as upstream's node e2e test sends it, it
 * turns the node NotReady, refuses new pods and stops its pods by priority group within
 * their shares, then lets go of the lock; PrepareForShutdown(false) brings it back.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { startLogind, type Inhibitor, type Logind } from '../harness/logind.ts';

const SHARE_SECONDS = 5;
const WHY = 'Kubelet needs time to handle node shutdown';
const MESSAGE = 'Pod was terminated in response to imminent node shutdown.';

/** Each group's pod: [priority class, value, how it answers SIGTERM]. */
const GROUPS = [
  // Stops one second after SIGTERM: its group ends early.
  { name: 'low', value: 0, onTerm: 'sleep 1; exit 0' },
  // Ignores SIGTERM: killed when its share is over.
  { name: 'mid', value: 100_000, onTerm: ':' },
  { name: 'high', value: 1_000_000, onTerm: 'exit 0' },
] as const;

const berthLock = (list: readonly Inhibitor[]): Inhibitor | undefined =>
  list.find((i) => i.who === 'kubelet' && i.what === 'shutdown' && i.mode === 'delay');

describe('graceful node shutdown on berth (containerd 2.x, real systemd-logind)', () => {
  let cluster: Cluster;
  let logind: Logind;
  let berth: BerthNode;
  let node: string;
  let stamps: string;

  const readyCondition = async () =>
    (await getJson<Node>(cluster, ['get', 'node', node]))?.status?.conditions?.find(
      (c) => c.type === 'Ready',
    );

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    logind = await startLogind(join(cluster.root, 'logind'), {
      inhibitDelayMaxSec: 3 * SHARE_SECONDS + 10,
    });
    stamps = join(cluster.root, 'stamps');
    berth = await startBerth(cluster, {
      env: {
        DBUS_SYSTEM_BUS_ADDRESS: logind.address,
        BERTH_LOGIND_CONF_DIR: logind.confDir,
      },
      extraConfig: [
        'shutdownGracePeriodByPodPriority:',
        ...GROUPS.flatMap((g) => [
          `  - priority: ${g.value}`,
          `    shutdownGracePeriodSeconds: ${SHARE_SECONDS}`,
        ]),
      ],
    });
    node = berth.nodeName;
    for (const g of GROUPS) {
      if (g.value > 0)
        await applyJson(cluster, {
          apiVersion: 'scheduling.k8s.io/v1',
          kind: 'PriorityClass',
          metadata: { name: `shutdown-${g.name}` },
          value: g.value,
        });
      // /proc/uptime is the host's clock (not namespaced): stamps compare across pods.
      const script = [
        `trap 'read up rest < /proc/uptime; echo $up > /stamps/${g.name}; ${g.onTerm}' TERM`,
        'while true; do sleep 3600 & wait $!; done',
      ].join('\n');
      const pod = busyboxPod(cluster, g.name, node, {
        command: ['sh', '-c', script],
        grace: 30,
        extraSpec: {
          ...(g.value > 0 && { priorityClassName: `shutdown-${g.name}` }),
          volumes: [{ name: 'stamps', hostPath: { path: stamps, type: 'DirectoryOrCreate' } }],
        },
      });
      const [c] = pod.spec?.containers ?? [];
      if (c !== undefined) c.volumeMounts = [{ name: 'stamps', mountPath: '/stamps' }];
      await applyJson(cluster, pod);
    }
    for (const g of GROUPS)
      await waitForPod(cluster, 'default', g.name, 'Running', isRunningAndReady, 120_000);
  });

  after(async () => {
    await berth.stop();
    await logind.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('berth holds a delay lock on shutdown in logind', async () => {
    const lock = await eventually('berth lock', async () =>
      berthLock(await logind.listInhibitors()),
    );
    assert.equal(lock.why, WHY);
    assert.equal(lock.uid, 0);
  });

  test('a malformed PrepareForShutdown is logged and ignored', async () => {
    await logind.sendPrepareForShutdown('string:true');
    await logind.sendPrepareForShutdown();
    await eventually('the log lines', async () => {
      const log = await readFile(berth.logFile, 'utf8');
      return log.includes('PrepareForShutdown event was not bool type as expected') &&
        log.includes('PrepareForShutdown event was empty')
        ? true
        : undefined;
    });
    assert.ok(berth.process.alive());
    assert.equal((await readyCondition())?.status, 'True');
    for (const g of GROUPS) {
      const pod = await waitForPod(cluster, 'default', g.name, 'Running', isRunningAndReady, 1000);
      assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 0);
    }
    assert.ok(berthLock(await logind.listInhibitors()));
  });

  test('PrepareForShutdown(true): NotReady, pods stopped by group within their shares, new pods refused, lock released', async (t) => {
    await logind.sendPrepareForShutdown('boolean:true');
    const notReady = await eventually(
      'node NotReady',
      async () => {
        const c = await readyCondition();
        return c?.status === 'False' ? c : undefined;
      },
      20_000,
    );
    assert.equal(notReady.reason, 'KubeletNotReady');
    assert.equal(notReady.message, 'node is shutting down');

    const ended: Pod[] = [];
    for (const g of GROUPS) {
      ended.push(
        await waitForPod(
          cluster,
          'default',
          g.name,
          'Failed',
          (p) => p.status?.phase === 'Failed',
          60_000,
        ),
      );
    }
    for (const pod of ended) {
      assert.equal(pod.status?.reason, 'Terminated');
      assert.equal(pod.status?.message, MESSAGE);
      const dt = pod.status?.conditions?.find((c) => c.type === 'DisruptionTarget');
      assert.equal(dt?.status, 'True');
      assert.equal(dt?.reason, 'TerminationByKubelet');
      assert.equal(dt?.message, MESSAGE);
    }

    const at = async (name: string): Promise<number> =>
      Number((await readFile(join(stamps, name), 'utf8')).trim());
    const [low, mid, high] = [await at('low'), await at('mid'), await at('high')];
    t.diagnostic(
      `SIGTERM at: mid ${(mid - low).toFixed(2)}s after low, high ${(high - mid).toFixed(2)}s after mid`,
    );
    // Low stopped after ~1 s, so the next group began early; mid ignored SIGTERM and
    // held its group for the whole share.
    assert.ok(low < mid && mid < high, `order low ${low} < mid ${mid} < high ${high}`);
    assert.ok(mid - low < SHARE_SECONDS - 1, `mid began ${mid - low}s after low`);
    assert.ok(
      high - mid >= SHARE_SECONDS - 0.5 && high - mid < SHARE_SECONDS + 3,
      `high began ${high - mid}s after mid (share ${SHARE_SECONDS}s)`,
    );
    const mids = ended[1]?.status?.containerStatuses?.[0]?.state?.terminated;
    assert.equal(mids?.exitCode, 137, 'mid was killed when its share ran out');

    await eventually(
      'the lock released',
      async () => (berthLock(await logind.listInhibitors()) === undefined ? true : undefined),
      15_000,
    );

    // Upstream's state file in --root-dir, for the graceful_shutdown_*_time metrics.
    const state = JSON.parse(
      await readFile(join(berth.dir, 'graceful_node_shutdown_state'), 'utf8'),
    ) as { startTime: string; endTime: string };
    assert.ok(Date.parse(state.endTime) - Date.parse(state.startTime) >= SHARE_SECONDS * 1000);

    await applyJson(cluster, busyboxPod(cluster, 'latecomer', node));
    const late = await waitForPod(
      cluster,
      'default',
      'latecomer',
      'rejected',
      (p) => p.status?.phase === 'Failed',
    );
    assert.equal(late.status?.reason, 'NodeShutdown');
    assert.equal(
      late.status?.message,
      'Pod was rejected: Pod was rejected as the node is shutting down.',
    );
  });

  test('PrepareForShutdown(false): the lock is taken again and the node is Ready', async () => {
    await logind.sendPrepareForShutdown('boolean:false');
    const lock = await eventually(
      'the lock retaken',
      async () => berthLock(await logind.listInhibitors()),
      15_000,
    );
    assert.equal(lock.why, WHY);
    await eventually(
      'node Ready',
      async () => ((await readyCondition())?.status === 'True' ? true : undefined),
      60_000,
    );
  });

  test('periods beyond InhibitDelayMaxSec: the drop-in is written, and a failed reload is reported at start', async () => {
    const config = await readFile(berth.configFile, 'utf8');
    await writeFile(
      berth.configFile,
      config.replaceAll(
        `shutdownGracePeriodSeconds: ${SHARE_SECONDS}`,
        'shutdownGracePeriodSeconds: 20',
      ),
    );
    berth = await berth.restart();
    const log = await eventually(
      'the start failure',
      async () => {
        const text = await readFile(berth.logFile, 'utf8');
        return text.includes('Failed to start node shutdown manager') ? text : undefined;
      },
      60_000,
    );
    // logind reloads on SIGHUP through systemd's KillUnit, which this host lacks.
    assert.match(log, /unable to reload logind conf: .*org\.freedesktop\.systemd1/);
    assert.equal(
      await readFile(join(logind.confDir, '99-kubelet.conf'), 'utf8'),
      '# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=60\n',
    );
    assert.equal(berthLock(await logind.listInhibitors()), undefined);
    assert.ok(berth.process.alive(), 'berth runs on without graceful shutdown');
  });
});
