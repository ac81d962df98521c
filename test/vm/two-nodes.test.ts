/**
 * Two berth nodes, one cluster: two guests joined to the host's control plane, pod CIDRs
 * allocated by kube-controller-manager, the CNI bridge plugin on each node plus routes
 * between the nodes' pod CIDRs over the host-only bridge, kube-proxy in each guest. A
 * Deployment spread over both nodes by the scheduler, pod-to-pod traffic across nodes, a
 * Service reaching the pod on the other node, `kubectl logs/exec` on both, and
 * `kubectl drain` of one node moving its pod to the other.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { applyJson, eventually, getJson } from '../harness/kube-helpers.ts';
import { startVmCluster, type VmCluster } from '../harness/vm-cluster.ts';
import { routePodCidrs, startGuestNode, type GuestImages } from '../harness/vm-node.ts';
import type { Guest } from '../harness/vm.ts';

const MINUTES = 60_000;

/**
 * An HTTP GET by busybox nc, printing the body's last line: the static busybox's wget
 * crashes (SIGSEGV) in glibc's static NSS when it looks the service up.
 */
const get = (ip: string, port: number): string[] => [
  'sh',
  '-c',
  `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 20 ${ip} ${port} | tail -n 1`,
];

describe('two berth nodes in VMs: one cluster, one pod network, kube-proxy, drain', () => {
  let vm: VmCluster;
  let a: Guest;
  let b: Guest;
  let images: GuestImages;

  const webPods = async (): Promise<Pod[]> =>
    (
      (await getJson<{ items: Pod[] }>(vm.cluster, ['get', 'pods', '-l', 'app=web']))?.items ?? []
    ).filter((p) => p.metadata?.deletionTimestamp === undefined);
  const running = (p: Pod): boolean =>
    p.status?.phase === 'Running' && (p.status.containerStatuses ?? []).every((c) => c.ready);
  const onNode = (pods: Pod[], node: string): Pod | undefined =>
    pods.find((p) => p.spec?.nodeName === node && running(p));

  before(async () => {
    vm = await startVmCluster({
      guests: 2,
      log: (m) => {
        console.error(m);
      },
    });
    const [ga, gb] = vm.guests;
    assert.ok(ga && gb);
    a = ga;
    b = gb;
    const nodes = await Promise.all(
      [a, b].map(async (guest) => ({
        guest,
        ...(await startGuestNode(vm.cluster, guest, vm.network.hostIp, {
          driver: 'systemd',
          kubeProxy: true,
        })),
      })),
    );
    images = nodes[0]?.images ?? assert.fail('no node');
    assert.notEqual(nodes[0]?.podCidr, nodes[1]?.podCidr);
    await routePodCidrs(nodes);
  });

  after(async () => {
    await vm.stop();
    assert.deepEqual(await vm.leaks(), []);
  });

  test('a Deployment is spread over both nodes; logs and exec work on each', async () => {
    const labels = { app: 'web' };
    await applyJson(vm.cluster, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: 'default' },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            automountServiceAccountToken: false,
            terminationGracePeriodSeconds: 5,
            topologySpreadConstraints: [
              {
                maxSkew: 1,
                topologyKey: 'kubernetes.io/hostname',
                whenUnsatisfiable: 'DoNotSchedule',
                // A cordoned (drained) node is not a domain to spread over.
                nodeTaintsPolicy: 'Honor',
                labelSelector: { matchLabels: labels },
              },
            ],
            containers: [
              {
                name: 'web',
                image: images.busybox,
                imagePullPolicy: 'Never',
                command: [
                  'sh',
                  '-c',
                  'mkdir -p /www && echo "served by $(hostname)" > /www/index.html && echo web up on $(hostname) && exec httpd -f -p 8080 -h /www',
                ],
                ports: [{ containerPort: 8080 }],
                readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 5 },
              },
            ],
          },
        },
      },
    });
    const pods = await eventually(
      'one running web pod on each node',
      async () => {
        const list = await webPods();
        return onNode(list, a.name) && onNode(list, b.name) ? list : undefined;
      },
      15 * MINUTES,
      3000,
    );
    for (const node of [a, b]) {
      const pod = onNode(pods, node.name);
      assert.ok(pod?.metadata?.name);
      assert.equal(pod.status?.hostIP, node.ip);
      const logs = await vm.cluster.kubectl(['logs', pod.metadata.name]);
      assert.match(logs, /web up on web-/);
      const out = await vm.cluster.kubectl(['exec', pod.metadata.name, '--', 'hostname']);
      assert.equal(out.trim(), pod.metadata.name);
    }
  });

  test('pod-to-pod traffic across nodes and a Service reaching the pod on the other node', async () => {
    const pods = await webPods();
    const pa = onNode(pods, a.name);
    const pb = onNode(pods, b.name);
    assert.ok(pa?.metadata?.name && pb?.metadata?.name && pb.status?.podIP);
    const fromA = await vm.cluster.kubectl([
      'exec',
      pa.metadata.name,
      '--',
      ...get(pb.status.podIP, 8080),
    ]);
    assert.equal(fromA.trim(), `served by ${pb.metadata.name}`);

    await applyJson(vm.cluster, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'default' },
      spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] },
    });
    const clusterIp = (
      await vm.cluster.kubectl(['get', 'svc', 'web', '-o', 'jsonpath={.spec.clusterIP}'])
    ).trim();
    // kube-proxy balances at random: ask until the pod on the other node answers.
    const podA = pa.metadata.name;
    const answer = await eventually(
      `the Service ${clusterIp} answering from ${pb.metadata.name}`,
      async () => {
        const out = await vm.cluster
          .kubectl(['exec', podA, '--', ...get(clusterIp, 80)])
          .catch(() => '');
        return out.includes(pb.metadata?.name ?? '?') ? out : undefined;
      },
      10 * MINUTES,
      1000,
    );
    assert.equal(answer.trim(), `served by ${pb.metadata.name}`);
  });

  test('kubectl drain moves the drained node’s pod to the other node', async () => {
    await vm.cluster.kubectl([
      'drain',
      b.name,
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      '--timeout=10m',
    ]);
    const pods = await eventually(
      `both web pods running on ${a.name}`,
      async () => {
        const list = await webPods();
        return list.length === 2 && list.every((p) => p.spec?.nodeName === a.name && running(p))
          ? list
          : undefined;
      },
      15 * MINUTES,
      3000,
    );
    assert.equal(pods.length, 2);
    const spec = await vm.cluster.kubectl([
      'get',
      'node',
      b.name,
      '-o',
      'jsonpath={.spec.unschedulable}',
    ]);
    assert.equal(spec.trim(), 'true');
  });
});
