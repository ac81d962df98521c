/**
 * Init containers, sidecars and the security context on a berth node (issue #4 items 1
 * and 6), checked from inside the containers: init order and rerun, sidecar start and
 * stop order (written by the containers to a host directory), user and groups,
 * capabilities, no_new_privs, seccomp, read-only root, sysctls, and what is refused:
 * runAsNonRoot against a root image, a forbidden sysctl, a missing Localhost profile.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
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

type Spec = NonNullable<Pod['spec']>;

describe('init containers, sidecars and security context on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;
  let shared: string;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    node = berth.nodeName;
    shared = await mkdtemp(join(tmpdir(), 'berth-containers-'));
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
    await rm(shared, { recursive: true, force: true });
  });

  const kubectl = (args: string[]): Promise<string> => cluster.kubectl(['-n', 'default', ...args]);

  const box = (name: string, script: string, extra: Partial<Container> = {}): Container => ({
    name,
    image: cluster.images.busyboxLocal,
    imagePullPolicy: 'IfNotPresent',
    command: ['sh', '-c', script],
    volumeMounts: [{ name: 'out', mountPath: '/out' }],
    ...extra,
  });

  function pod(name: string, spec: Partial<Spec>, dir?: string): Pod {
    const base = busyboxPod(cluster, name, node);
    return {
      ...base,
      spec: {
        ...base.spec,
        ...(dir !== undefined && {
          volumes: [{ name: 'out', hostPath: { path: dir, type: 'DirectoryOrCreate' } }],
        }),
        ...spec,
      } as Spec,
    };
  }

  test('init containers run in order; a failing one is rerun until it succeeds', async () => {
    const dir = join(shared, 'init');
    await applyJson(
      cluster,
      pod(
        'inits',
        {
          initContainers: [
            box('first', 'echo first >> /out/order'),
            // Fails on its first run only.
            box(
              'second',
              'echo second >> /out/order; [ -f /out/ran ] || { touch /out/ran; exit 1; }',
            ),
          ],
          containers: [box('main', 'echo main >> /out/order; sleep 3600')],
        },
        dir,
      ),
    );
    const p = await waitForPod(cluster, 'default', 'inits', 'Running', isRunningAndReady, 90_000);
    assert.equal(p.status?.conditions?.find((c) => c.type === 'Initialized')?.status, 'True');
    const second = p.status?.initContainerStatuses?.find((c) => c.name === 'second');
    assert.ok((second?.restartCount ?? 0) >= 1, 'the failed init container was rerun');
    assert.equal(second?.state?.terminated?.reason, 'Completed');
    // restartPolicy Always reruns the failed init container only, not the ones before it.
    assert.equal(await readFile(join(dir, 'order'), 'utf8'), 'first\nsecond\nsecond\nmain\n');
  });

  test('sidecars start in order before the app, keep running, and stop after it in reverse', async () => {
    const dir = join(shared, 'sidecars');
    const side = (n: string) =>
      box(
        n,
        `echo ${n}-start >> /out/order; trap "echo ${n}-stop >> /out/order; exit 0" TERM; while true; do sleep 0.2; done`,
        { restartPolicy: 'Always' },
      );
    await applyJson(
      cluster,
      pod(
        'sidecars',
        {
          terminationGracePeriodSeconds: 10,
          initContainers: [side('side1'), side('side2')],
          containers: [
            box(
              'main',
              'echo main-start >> /out/order; trap "echo main-stop >> /out/order; exit 0" TERM; while true; do sleep 0.2; done',
            ),
          ],
        },
        dir,
      ),
    );
    const p = await waitForPod(
      cluster,
      'default',
      'sidecars',
      'Running',
      isRunningAndReady,
      90_000,
    );
    assert.ok(
      (p.status?.initContainerStatuses ?? []).every((c) => c.state?.running !== undefined),
      'the sidecars keep running',
    );
    await kubectl(['delete', 'pod', 'sidecars', '--wait=true', '--timeout=90s']);
    assert.equal(
      await readFile(join(dir, 'order'), 'utf8'),
      'side1-start\nside2-start\nmain-start\nmain-stop\nside2-stop\nside1-stop\n',
    );
  });

  test('security context: user, groups, capabilities, no_new_privs, seccomp, read-only root, sysctl', async () => {
    await applyJson(
      cluster,
      pod('secure', {
        securityContext: {
          runAsUser: 1000,
          runAsGroup: 3000,
          supplementalGroups: [4000],
          sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '80' }],
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name: 'main',
            image: cluster.images.busyboxLocal,
            imagePullPolicy: 'IfNotPresent',
            command: ['sleep', '3600'],
            securityContext: {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              runAsNonRoot: true,
              capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
            },
          },
        ],
      }),
    );
    await waitForPod(cluster, 'default', 'secure', 'Running', isRunningAndReady);
    const id = await kubectl(['exec', 'secure', '--', 'id']);
    assert.match(id, /uid=1000\b/);
    assert.match(id, /gid=3000\b/);
    assert.match(id, /\b4000\b/);
    const status = await kubectl(['exec', 'secure', '--', 'cat', '/proc/self/status']);
    assert.match(status, /NoNewPrivs:\s+1/);
    assert.match(status, /Seccomp:\s+2/);
    // Only NET_BIND_SERVICE (bit 10) is left in the bounding set.
    assert.match(status, /CapBnd:\s+0000000000000400/);
    await assert.rejects(kubectl(['exec', 'secure', '--', 'touch', '/rootfs-write']), /Read-only/i);
    assert.equal(
      (
        await kubectl([
          'exec',
          'secure',
          '--',
          'cat',
          '/proc/sys/net/ipv4/ip_unprivileged_port_start',
        ])
      ).trim(),
      '80',
    );
  });

  test('the security context holds on every start: first, after a crash, after a berth restart', async () => {
    // Each start prints what the container runs as, so every run is checked from its own
    // log, with no exec racing the exit.
    const report =
      'id; grep -E "^(NoNewPrivs|Seccomp|CapBnd):" /proc/self/status; ' +
      'touch /rootfs-write 2>&1 || true; sleep 15; exit 3';
    await applyJson(
      cluster,
      pod('secure-restarts', {
        securityContext: {
          runAsUser: 1000,
          runAsGroup: 3000,
          supplementalGroups: [4000],
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name: 'main',
            image: cluster.images.busyboxLocal,
            imagePullPolicy: 'IfNotPresent',
            command: ['sh', '-c', report],
            securityContext: {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
            },
          },
        ],
      }),
    );
    const facts = (log: string, run: string): void => {
      assert.match(log, /uid=1000\b.*gid=3000\b.*\b4000\b/, run);
      assert.match(log, /NoNewPrivs:\s+1/, run);
      assert.match(log, /Seccomp:\s+2/, run);
      assert.match(log, /CapBnd:\s+0000000000000400/, run);
      assert.match(log, /Read-only file system/, run);
    };
    const restarts = (p: Pod) => p.status?.containerStatuses?.[0]?.restartCount ?? 0;
    const runningAfter = (n: number) => (p: Pod) =>
      restarts(p) > n && p.status?.containerStatuses?.[0]?.state?.running !== undefined;
    const first = await waitForPod(
      cluster,
      'default',
      'secure-restarts',
      'restarted',
      runningAfter(0),
      90_000,
    );
    facts(await kubectl(['logs', 'secure-restarts', '--previous']), 'first start');
    facts(await kubectl(['logs', 'secure-restarts']), 'after a crash');
    berth = await berth.restart();
    await waitForPod(
      cluster,
      'default',
      'secure-restarts',
      'restarted by the new berth',
      runningAfter(restarts(first)),
      120_000,
    );
    facts(await kubectl(['logs', 'secure-restarts']), 'after a berth restart');
    await kubectl(['delete', 'pod', 'secure-restarts', '--wait=false']);
  });

  test("kubectl debug adds an ephemeral container that sees the target's processes", async () => {
    await applyJson(cluster, pod('debuggee', {}));
    await waitForPod(cluster, 'default', 'debuggee', 'Running', isRunningAndReady);
    await kubectl([
      'debug',
      'debuggee',
      '--image',
      cluster.images.busyboxLocal,
      '--image-pull-policy',
      'IfNotPresent',
      '--container',
      'dbg',
      '--target',
      'main',
      '--',
      'sh',
      '-c',
      'ps; sleep 3600',
    ]);
    const p = await waitForPod(cluster, 'default', 'debuggee', 'debug container running', (x) =>
      (x.status?.ephemeralContainerStatuses ?? []).some(
        (c) => c.name === 'dbg' && c.state?.running !== undefined,
      ),
    );
    // The app container was not restarted by adding it.
    assert.equal(p.status?.containerStatuses?.[0]?.restartCount, 0);
    const ps = await eventually('the debug output', async () => {
      const out = await kubectl(['logs', 'debuggee', '-c', 'dbg']);
      return out.includes('sleep 3600') ? out : undefined;
    });
    // The target's `sleep 3600` (busybox's main) is visible in the shared PID namespace.
    assert.match(ps, /sleep 3600/);
    assert.match(await kubectl(['exec', 'debuggee', '-c', 'dbg', '--', 'ps']), /sleep 3600/);
  });

  test('refused: runAsNonRoot with a root image, a forbidden sysctl, a missing Localhost profile', async () => {
    await applyJson(
      cluster,
      pod('nonroot', {
        containers: [
          {
            name: 'main',
            image: cluster.images.busyboxLocal,
            imagePullPolicy: 'IfNotPresent',
            command: ['sleep', '3600'],
            securityContext: { runAsNonRoot: true },
          },
        ],
      }),
    );
    const nonroot = await waitForPod(
      cluster,
      'default',
      'nonroot',
      'config error',
      (p) =>
        p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
    );
    assert.match(
      nonroot.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '',
      /container has runAsNonRoot and image will run as root/,
    );

    await applyJson(
      cluster,
      pod('bad-sysctl', {
        securityContext: { sysctls: [{ name: 'kernel.msgmax', value: '65536' }] },
      }),
    );
    const sysctl = await waitForPod(
      cluster,
      'default',
      'bad-sysctl',
      'rejected',
      (p) => p.status?.phase === 'Failed',
    );
    assert.equal(sysctl.status?.reason, 'SysctlForbidden');
    assert.match(sysctl.status?.message ?? '', /forbidden sysctl: "kernel.msgmax" not allowlisted/);

    await applyJson(
      cluster,
      pod('bad-seccomp', {
        securityContext: { seccompProfile: { type: 'Localhost', localhostProfile: 'nope.json' } },
      }),
    );
    const seccomp = await eventually('the seccomp profile error', async () => {
      const p = await getPod(cluster, 'default', 'bad-seccomp');
      const w = p?.status?.containerStatuses?.[0]?.state?.waiting;
      return w !== undefined && w.reason !== 'ContainerCreating' ? w : undefined;
    });
    assert.match(
      seccomp.reason ?? '',
      /CreateContainerError|CreateContainerConfigError|RunContainerError/,
    );
    assert.match(seccomp.message ?? '', /seccomp|nope\.json/i);
  });
});
