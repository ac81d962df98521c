/**
 * berth as the node of a real cluster (issue #3 acceptance), against containerd 2.x
 * and 1.6: registration and heartbeat, pods and a Deployment, deletion, restart
 * recovery.
 */
import assert from 'node:assert/strict';
import { cpus } from 'node:os';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster, type RuntimeKind } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import {
  applyJson,
  applyRegistrySecret,
  listPods,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

function suite(kind: RuntimeKind): void {
  describe(`berth node on ${kind}`, () => {
    let cluster: Cluster;
    let berth: BerthNode;
    let cri: GrpcCriClient;

    before(async () => {
      cluster = await startCluster({ runtime: kind });
      berth = await startBerth(cluster, {
        extraConfig: [
          'kubeReserved:',
          '  cpu: 100m',
          '  memory: 64Mi',
          'systemReserved:',
          '  cpu: 150m',
        ],
      });
      cri = new GrpcCriClient(cluster.runtime.socket);
    });

    after(async () => {
      cri.close();
      await berth.stop();
      await cluster.stop();
      assert.deepEqual(await cluster.leaks(), []);
    });

    const node = (): Promise<Node | undefined> =>
      getJson<Node>(cluster, ['get', 'node', berth.nodeName]);

    test('the node registers and turns Ready with the host capacity', async () => {
      const ready = await eventually(
        'node Ready',
        async () => {
          const n = await node();
          return n?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ===
            true
            ? n
            : undefined;
        },
        30_000,
      );
      const meminfo = await readFile('/proc/meminfo', 'utf8');
      const memKi = /^MemTotal:\s+(\d+) kB/m.exec(meminfo)?.[1];
      assert.equal(ready.status?.capacity?.['cpu'], String(cpus().length));
      assert.equal(ready.status?.capacity?.['memory'], `${memKi ?? ''}Ki`);
      assert.equal(ready.status?.capacity?.['pods'], '110');
      assert.ok(ready.status?.capacity?.['ephemeral-storage']);
      // Allocatable: capacity - kubeReserved - systemReserved - evictionHard (100Mi).
      assert.equal(ready.status?.allocatable?.['cpu'], `${cpus().length * 1000 - 250}m`);
      assert.equal(
        ready.status?.allocatable?.['memory'],
        `${Number(memKi) - 64 * 1024 - 100 * 1024}Ki`,
      );
      assert.equal(ready.metadata?.labels?.['kubernetes.io/hostname'], berth.nodeName);
      assert.equal(ready.metadata?.labels?.['kubernetes.io/os'], 'linux');
      assert.match(ready.status?.nodeInfo?.containerRuntimeVersion ?? '', /^containerd:\/\//);
      assert.match(ready.status?.nodeInfo?.kubeletVersion ?? '', /^v1\.37\./);
      assert.deepEqual(
        ready.status?.addresses?.find((a) => a.type === 'InternalIP')?.address,
        '127.0.0.1',
      );
      for (const type of ['MemoryPressure', 'DiskPressure', 'PIDPressure']) {
        assert.equal(ready.status?.conditions?.find((c) => c.type === type)?.status, 'False', type);
      }
      // maxOpenFiles (default 1000000) becomes berth's own RLIMIT_NOFILE, soft and hard, as
      // upstream's. Raising the hard limit needs CAP_SYS_RESOURCE, which some hosts (this
      // machine's container) drop: then berth logs upstream's error and runs on.
      const limits = await readFile(`/proc/${String(berth.process.pid)}/limits`, 'utf8');
      const raised = await run(
        'prlimit',
        ['--pid', String(process.pid), '--nofile=1000000:1000000'],
        {
          okCodes: [0, 1],
        },
      );
      if (raised.exitCode === 0)
        assert.match(limits, /^Max open files\s+1000000\s+1000000\s+files/m);
      else
        assert.match(
          await readFile(berth.logFile, 'utf8'),
          /Failed to set rlimit on max file handles.*--nofile=1000000:1000000: prlimit: failed to set the NOFILE resource limit: Operation not permitted/,
        );
      // oomScoreAdj (default -999) is berth's own score; lowering it needs the same
      // CAP_SYS_RESOURCE, so without it berth logs upstream's message instead.
      const score = (
        await readFile(`/proc/${String(berth.process.pid)}/oom_score_adj`, 'utf8')
      ).trim();
      if (score !== '-999')
        assert.match(await readFile(berth.logFile, 'utf8'), /Failed to ApplyOOMScoreAdj.*EACCES/);
    });

    test('the Lease is held by the node and renewed', async () => {
      const lease = await eventually('lease', () =>
        getJson<Lease>(cluster, ['-n', 'kube-node-lease', 'get', 'lease', berth.nodeName]),
      );
      assert.equal(lease.spec?.holderIdentity, berth.nodeName);
      assert.equal(lease.spec?.leaseDurationSeconds, 40);
      const first = lease.spec?.renewTime;
      await eventually(
        'lease renewal',
        async () => {
          const l = await getJson<Lease>(cluster, [
            '-n',
            'kube-node-lease',
            'get',
            'lease',
            berth.nodeName,
          ]);
          return l?.spec?.renewTime !== first ? true : undefined;
        },
        20_000,
      );
    });

    test('a deleted Node is registered again', async () => {
      const before = await node();
      await cluster.kubectl(['delete', 'node', berth.nodeName, '--wait=true']);
      const again = await eventually(
        'node re-registered',
        async () => {
          const n = await node();
          return n !== undefined && n.metadata?.uid !== before?.metadata?.uid ? n : undefined;
        },
        30_000,
      );
      assert.equal(again.metadata?.name, berth.nodeName);
    });

    test('a pod with spec.nodeName runs, with exact status, events, and a CRI log file', async () => {
      await applyJson(
        cluster,
        busyboxPod(cluster, 'direct', berth.nodeName, {
          command: ['sh', '-c', 'echo hello from berth; exec sleep 3600'],
        }),
      );
      const pod = await waitForPod(
        cluster,
        'default',
        'direct',
        'Running',
        isRunningAndReady,
        60_000,
      );
      const cs = pod.status?.containerStatuses?.[0];
      assert.match(cs?.containerID ?? '', /^containerd:\/\/[0-9a-f]{64}$/);
      assert.match(cs?.imageID ?? '', /^sha256:/);
      assert.equal(cs?.restartCount, 0);
      assert.match(pod.status?.podIP ?? '', /^10\.88\./);
      assert.equal(pod.status?.hostIP, '127.0.0.1');
      assert.equal(pod.status?.qosClass, 'BestEffort');
      for (const t of [
        'PodScheduled',
        'PodReadyToStartContainers',
        'Initialized',
        'ContainersReady',
        'Ready',
      ]) {
        assert.equal(pod.status?.conditions?.find((c) => c.type === t)?.status, 'True', t);
      }
      const reasons = (await podEvents(cluster, 'default', 'direct')).map((e) => e.reason);
      for (const r of ['Pulled', 'Created', 'Started'])
        assert.ok(reasons.includes(r), `event ${r} in ${reasons.join(',')}`);
      // Upstream's CRI labels, so crictl and log collectors understand berth's containers.
      const { containers } = await cri.runtime.listContainers({
        filter: { labelSelector: { 'io.kubernetes.pod.name': 'direct' } },
      });
      assert.equal(containers.length, 1);
      assert.equal(containers[0]?.labels['io.kubernetes.container.name'], 'main');
      assert.equal(containers[0]?.labels['io.kubernetes.pod.namespace'], 'default');
      assert.ok(containers[0]?.annotations['io.kubernetes.container.hash']);
      const log = await eventually('container log', async () => {
        const text = await readFile(
          `${berth.dir}/pod-logs/default_direct_${pod.metadata?.uid ?? ''}/main/0.log`,
          'utf8',
        ).catch(() => '');
        return text.includes('hello from berth') ? text : undefined;
      });
      assert.match(log, /^\S+ stdout F hello from berth$/m);
    });

    test("the Node's status.images lists the runtime's images, largest first", async () => {
      const images = await eventually('status.images with busybox', async () => {
        const node = await getJson<Node>(cluster, ['get', 'node', berth.nodeName]);
        const list = node?.status?.images ?? [];
        return list.some((i) => i.names?.some((n) => n.includes('busybox'))) ? list : undefined;
      });
      const sizes = images.map((i) => i.sizeBytes ?? 0);
      assert.deepEqual(
        sizes,
        [...sizes].sort((a, b) => b - a),
      );
      for (const i of images) {
        assert.ok((i.names?.length ?? 0) > 0 && (i.names?.length ?? 0) <= 5);
        assert.ok((i.sizeBytes ?? 0) > 0);
      }
    });

    test("the Node's status.runtimeHandlers and status.features are the runtime's (CRI Status)", async () => {
      const cri_ = await cri.runtime.status({});
      const status = (await node())?.status as
        (NonNullable<Node['status']> & { features?: unknown }) | undefined;
      if (kind === 'containerd1') {
        // containerd 1.6 reports neither, so upstream's setters leave both out.
        assert.equal(cri_.runtimeHandlers.length, 0);
        assert.equal(status?.runtimeHandlers, undefined);
        assert.equal(status?.features, undefined);
        return;
      }
      assert.ok(cri_.runtimeHandlers.some((h) => h.name === ''));
      assert.deepEqual(
        status?.runtimeHandlers,
        cri_.runtimeHandlers.map((h) => ({
          name: h.name,
          features: {
            recursiveReadOnlyMounts: h.features?.recursiveReadOnlyMounts ?? false,
            userNamespaces: h.features?.userNamespaces ?? false,
          },
        })),
      );
      assert.deepEqual(status?.features, {
        supplementalGroupsPolicy: cri_.features?.supplementalGroupsPolicy,
      });
    });

    test('kubectl exec reaches the pod through this runtime: stdin in, output and exit code out', async () => {
      // kubectl's WebSocket exec, which berth turns into SPDY streams at this runtime's
      // streaming server, opening them with the upgrade request itself.
      const kubectl = (args: readonly string[], input?: string, okCodes?: readonly number[]) =>
        run(cluster.bin.kubectl, ['--kubeconfig', cluster.adminKubeconfig, ...args], {
          ...(input !== undefined && { input }),
          ...(okCodes !== undefined && { okCodes }),
          timeoutMs: 60_000,
        });
      const echoed = await kubectl(
        ['exec', '-i', 'direct', '--', 'sh', '-c', 'cat; echo err >&2; exit 3'],
        'ping\n',
        [3],
      );
      assert.equal(echoed.exitCode, 3);
      assert.equal(echoed.stdout, 'ping\n');
      assert.match(echoed.stderr, /^err$/m);
      for (let i = 0; i < 5; i++) {
        const { stdout } = await kubectl(['exec', 'direct', '--', 'echo', `round ${String(i)}`]);
        assert.equal(stdout, `round ${String(i)}\n`);
      }
    });

    test('a 3-replica Deployment placed by the scheduler runs on berth; deleting it leaves nothing', async () => {
      await applyJson(cluster, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web', namespace: 'default' },
        spec: {
          replicas: 3,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              automountServiceAccountToken: false,
              terminationGracePeriodSeconds: 3,
              containers: [
                {
                  name: 'web',
                  image: cluster.images.busyboxLocal,
                  imagePullPolicy: 'IfNotPresent',
                  command: ['sleep', '3600'],
                },
              ],
            },
          },
        },
      });
      const pods = await eventually(
        '3 running replicas',
        async () => {
          const running = (await listPods(cluster, 'app=web')).filter(isRunningAndReady);
          return running.length === 3 ? running : undefined;
        },
        90_000,
      );
      for (const p of pods) assert.equal(p.spec?.nodeName, berth.nodeName);
      await cluster.kubectl(['-n', 'default', 'delete', 'deployment', 'web', '--wait=true']);
      await eventually(
        'replica pods gone from the API',
        async () => {
          return (await listPods(cluster, 'app=web')).length === 0 ? true : undefined;
        },
        30_000,
      );
      const { containers } = await cri.runtime.listContainers({
        filter: { labelSelector: { app: 'web' } },
      });
      const uids = new Set(pods.map((p) => p.metadata?.uid));
      const left = (await cri.runtime.listContainers({})).containers.filter((c) =>
        uids.has(c.labels['io.kubernetes.pod.uid']),
      );
      const sandboxes = (await cri.runtime.listPodSandbox({})).items.filter((s) =>
        uids.has(s.labels['io.kubernetes.pod.uid']),
      );
      assert.deepEqual([...containers, ...left], [], 'no container of the replicas is left');
      assert.deepEqual(sandboxes, [], 'no sandbox of the replicas is left');
    });

    test('a changed container image restarts the container with the new spec', async () => {
      await applyRegistrySecret(cluster, 'respec-creds');
      await applyJson(
        cluster,
        busyboxPod(cluster, 'respec', berth.nodeName, {
          extraSpec: { imagePullSecrets: [{ name: 'respec-creds' }] },
        }),
      );
      const before = await waitForPod(
        cluster,
        'default',
        'respec',
        'Running',
        isRunningAndReady,
        60_000,
      );
      // The image is one of the few pod fields the API lets change; upstream restarts on it.
      await cluster.kubectl([
        '-n',
        'default',
        'patch',
        'pod',
        'respec',
        '--type',
        'json',
        '-p',
        JSON.stringify([
          { op: 'replace', path: '/spec/containers/0/image', value: cluster.images.busybox },
        ]),
      ]);
      const after = await waitForPod(
        cluster,
        'default',
        'respec',
        'restarted with the new image',
        (p) => {
          const cs = p.status?.containerStatuses?.[0];
          return (
            isRunningAndReady(p) &&
            cs?.image === cluster.images.busybox &&
            cs.containerID !== before.status?.containerStatuses?.[0]?.containerID
          );
        },
        60_000,
      );
      assert.equal(after.status?.containerStatuses?.[0]?.restartCount, 1);
      assert.equal(after.status?.podIP, before.status?.podIP, 'same sandbox');
      await cluster.kubectl(['-n', 'default', 'delete', 'pod', 'respec', '--wait=false']);
    });

    test('berth killed with 10 pods running comes back with zero container restarts', async () => {
      const names = Array.from({ length: 10 }, (_, i) => `survivor-${i}`);
      for (const n of names) {
        // Each probe run is stamped in the container, so the test can count the probes
        // the restarted berth runs instead of sleeping.
        const p = busyboxPod(cluster, n, berth.nodeName);
        const [c] = p.spec?.containers ?? [];
        if (c !== undefined)
          c.readinessProbe = {
            exec: { command: ['sh', '-c', 'date +%s >> /tmp/probed'] },
            periodSeconds: 1,
          };
        await applyJson(cluster, p);
      }
      const before = await Promise.all(
        names.map((n) => waitForPod(cluster, 'default', n, 'Running', isRunningAndReady, 90_000)),
      );
      // Only the survivors' objects: other tests' pods may still be going away meanwhile.
      const uids = new Set(before.map((p) => p.metadata?.uid));
      const ours = async (): Promise<{ containers: string[]; sandboxes: number }> => ({
        containers: (await cri.runtime.listContainers({})).containers
          .filter((c) => uids.has(c.labels['io.kubernetes.pod.uid']))
          .map((c) => c.id)
          .sort(),
        sandboxes: (await cri.runtime.listPodSandbox({})).items.filter((sb) =>
          uids.has(sb.labels['io.kubernetes.pod.uid']),
        ).length,
      });
      const runtimeBefore = await ours();
      /** Probe runs per survivor container so far, read through the runtime. */
      const probeRuns = (): Promise<number[]> =>
        Promise.all(
          runtimeBefore.containers.map(async (containerId) => {
            const r = await cri.runtime.execSync({
              containerId,
              cmd: ['sh', '-c', 'cat /tmp/probed 2>/dev/null | wc -l'],
              timeout: 10n,
            });
            return Number(r.stdout.toString('utf8'));
          }),
        );
      await berth.kill();
      const probedBefore = await probeRuns();
      berth = await berth.restart();
      // Wait for berth to be back (the Ready heartbeat comes from the new process).
      await eventually(
        'berth back',
        async () => {
          const text = await readFile(berth.logFile, 'utf8');
          return (text.match(/Successfully registered node|Node already registered/g) ?? [])
            .length >= 2
            ? true
            : undefined;
        },
        30_000,
      );
      // The restarted berth synced every survivor (its probe workers run) and probed each twice.
      await eventually(
        'two probes of every survivor by the restarted berth',
        async () => {
          const now = await probeRuns();
          return now.every((runs, i) => runs >= (probedBefore[i] ?? 0) + 2) ? true : undefined;
        },
        60_000,
      );
      for (const [i, n] of names.entries()) {
        const pod = await waitForPod(cluster, 'default', n, 'Running', isRunningAndReady);
        const was = before[i]?.status?.containerStatuses?.[0];
        const now = pod.status?.containerStatuses?.[0];
        assert.equal(now?.restartCount, 0, `${n} restarts`);
        assert.equal(now?.containerID, was?.containerID, `${n} same container`);
        assert.equal(pod.status?.podIP, before[i]?.status?.podIP, `${n} same sandbox IP`);
      }
      const runtimeAfter = await ours();
      assert.deepEqual(
        runtimeAfter.containers,
        runtimeBefore.containers,
        'no container created or removed',
      );
      assert.equal(runtimeAfter.sandboxes, runtimeBefore.sandboxes, 'no duplicate sandboxes');
      await cluster.kubectl(['-n', 'default', 'delete', 'pod', ...names, '--wait=false']);
    });

    test('pods deleted while berth is down are cleaned up when it starts', async () => {
      for (const n of ['graceful-while-down', 'forced-while-down']) {
        await applyJson(cluster, busyboxPod(cluster, n, berth.nodeName));
      }
      const pods = await Promise.all(
        ['graceful-while-down', 'forced-while-down'].map((n) =>
          waitForPod(cluster, 'default', n, 'Running', isRunningAndReady, 60_000),
        ),
      );
      const uids = new Set(pods.map((p) => p.metadata?.uid));
      await berth.stop();
      // Graceful: the object stays (deletionTimestamp) until the node confirms the kill.
      await cluster.kubectl([
        '-n',
        'default',
        'delete',
        'pod',
        'graceful-while-down',
        '--wait=false',
      ]);
      // Forced: the object is gone at once; only the runtime still has the pod (an orphan).
      await cluster.kubectl([
        '-n',
        'default',
        'delete',
        'pod',
        'forced-while-down',
        '--grace-period=0',
        '--force',
      ]);
      berth = await berth.restart();
      await eventually(
        'the deleted pods gone from the API and the runtime',
        async () => {
          const list = await getJson<{ items: Pod[] }>(cluster, ['-n', 'default', 'get', 'pods']);
          const inApi = (list?.items ?? []).some((p) => uids.has(p.metadata?.uid));
          const { containers } = await cri.runtime.listContainers({});
          const { items } = await cri.runtime.listPodSandbox({});
          const inRuntime =
            containers.some((c) => uids.has(c.labels['io.kubernetes.pod.uid'])) ||
            items.some((sb) => uids.has(sb.labels['io.kubernetes.pod.uid']));
          return !inApi && !inRuntime ? true : undefined;
        },
        60_000,
      );
    });
  });
}

suite('containerd2');
suite('containerd1');
