/**
 * One berth node in a virtual machine (systemd PID 1, cgroup v2, the systemd cgroup
 * driver, containerd 2.x inside the guest) joined to the host's control plane over the
 * host-only bridge: a pod runs with its status in the API, `kubectl logs` and `exec`
 * reach the kubelet API on the guest's bridge address. Then graceful node shutdown for
 * real: `systemctl poweroff` inside the guest, berth's delay inhibitor lock holds the
 * shutdown while it stops the pods by priority group, and what it reported is read from
 * the API after the machine is gone.
 *
 * Under emulation everything is slow: waits are minutes, and nothing here asserts time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { startVmCluster, type VmCluster } from '../harness/vm-cluster.ts';
import { berthLogTail, startGuestNode } from '../harness/vm-node.ts';
import type { Guest } from '../harness/vm.ts';

const MINUTES = 60_000;
const SHARE_SECONDS = 20;
const MESSAGE = 'Pod was terminated in response to imminent node shutdown.';
/** Each group's pod: priority class, value, what it does on SIGTERM. */
const GROUPS = [
  { name: 'low', value: 0, onTerm: 'exit 0' },
  // Ignores SIGTERM: killed when its group's share is over.
  { name: 'mid', value: 100_000, onTerm: ':' },
  { name: 'high', value: 1_000_000, onTerm: 'exit 0' },
  // The last group ignores SIGTERM and so holds the lock for its whole share, time in which
  // the other groups' statuses reach the API. Its own status is not asserted: as upstream,
  // berth lets go of the lock when the last group ends, and systemd then stops berth, racing
  // that last status write.
  { name: 'last', value: 2_000_000, onTerm: ':' },
] as const;
/** The groups whose statuses must have reached the API. */
const CHECKED = GROUPS.filter((g) => g.name !== 'last');

describe('berth in a VM: systemd, cgroup v2, containerd 2.x, joined over the bridge', () => {
  let vm: VmCluster;
  let guest: Guest;
  let podCidr: string;

  before(async () => {
    vm = await startVmCluster({
      guests: 1,
      log: (m) => {
        console.error(m);
      },
    });
    const [g] = vm.guests;
    assert.ok(g);
    guest = g;
    ({ podCidr } = await startGuestNode(vm.cluster, guest, vm.network.hostIp, {
      driver: 'systemd',
      extraConfig: [
        'shutdownGracePeriodByPodPriority:',
        ...GROUPS.map(
          (gr) => `  - {priority: ${gr.value}, shutdownGracePeriodSeconds: ${SHARE_SECONDS}}`,
        ),
      ],
    }));
  });

  after(async () => {
    await vm.stop();
    assert.deepEqual(await vm.leaks(), []);
  });

  test('the guest is a systemd + cgroup v2 machine', async () => {
    assert.equal((await guest.sh('cat /proc/1/comm')).trim(), 'systemd');
    assert.equal((await guest.sh('stat -fc %T /sys/fs/cgroup')).trim(), 'cgroup2fs');
  });

  test('a pod runs on the guest node, its status in the API; kubectl logs and exec work', async () => {
    await applyJson(
      vm.cluster,
      busyboxPod(vm.cluster, 'hello', guest.name, {
        command: ['sh', '-c', 'echo hello from $(hostname); exec sleep 3600'],
      }),
    );
    const pod = await waitForPod(
      vm.cluster,
      'default',
      'hello',
      'Running',
      isRunningAndReady,
      10 * MINUTES,
    ).catch(async (err: unknown) => {
      throw new Error(`pod not Running; berth's log:\n${await berthLogTail(guest)}`, {
        cause: err,
      });
    });
    assert.equal(pod.status?.hostIP, guest.ip);
    const prefix = podCidr.split('.').slice(0, 3).join('.');
    assert.ok(pod.status?.podIP?.startsWith(`${prefix}.`), `pod IP ${String(pod.status?.podIP)}`);
    const logs = await eventually(
      'the pod log',
      async () => {
        const out = await vm.cluster.kubectl(['logs', 'hello']);
        return out.includes('hello from hello') ? out : undefined;
      },
      5 * MINUTES,
      2000,
    );
    assert.match(logs, /hello from hello/);
    const exec = await vm.cluster.kubectl(['exec', 'hello', '--', 'sh', '-c', 'echo $((6 * 7))']);
    assert.equal(exec.trim(), '42');
    // The container's cgroup is a systemd scope under the pod's slice (the systemd driver).
    const cgroup = await vm.cluster.kubectl(['exec', 'hello', '--', 'cat', '/proc/self/cgroup']);
    assert.match(cgroup.trim(), /^0::\//);
    await vm.cluster.kubectl(['delete', 'pod', 'hello', '--wait=false']);
  });

  test('systemctl poweroff: berth delays it, stops pods by priority, reports before the VM dies', async () => {
    for (const g of GROUPS) {
      if (g.value > 0)
        await applyJson(vm.cluster, {
          apiVersion: 'scheduling.k8s.io/v1',
          kind: 'PriorityClass',
          metadata: { name: `vm-shutdown-${g.name}` },
          value: g.value,
        });
      const script = [`trap '${g.onTerm}' TERM`, 'while true; do sleep 3600 & wait $!; done'].join(
        '\n',
      );
      await applyJson(
        vm.cluster,
        busyboxPod(vm.cluster, `sd-${g.name}`, guest.name, {
          command: ['sh', '-c', script],
          grace: 60,
          extraSpec: g.value > 0 ? { priorityClassName: `vm-shutdown-${g.name}` } : {},
        }),
      );
    }
    for (const g of GROUPS)
      await waitForPod(
        vm.cluster,
        'default',
        `sd-${g.name}`,
        'Running',
        isRunningAndReady,
        10 * MINUTES,
      );

    // berth's delay lock, as logind lists it (upstream's who/why).
    const locks = await eventually(
      "berth's delay inhibitor lock",
      async () => {
        const out = await guest.sh('systemd-inhibit --list --no-pager --no-legend');
        return /kubelet.*shutdown.*delay/.test(out) ? out : undefined;
      },
      5 * MINUTES,
      2000,
    );
    assert.match(locks, /Kubelet needs time to handle node shutdown/);
    // logind's InhibitDelayMaxSec raised by berth to cover the groups' shares (upstream's drop-in).
    const maxDelay = await guest.sh(
      'busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec',
    );
    const usec = Number(/\d+/.exec(maxDelay)?.[0]);
    assert.ok(
      usec >= GROUPS.length * SHARE_SECONDS * 1_000_000,
      `InhibitDelayMaxUSec ${maxDelay.trim()}`,
    );

    await guest.sh('systemctl poweroff --no-block');
    await guest.waitForPowerOff(15 * MINUTES);

    // The machine is gone: all that follows was reported before it went down.
    for (const g of CHECKED) {
      const pod = await getJson<Pod>(vm.cluster, ['get', 'pod', `sd-${g.name}`]);
      assert.equal(pod?.status?.phase, 'Failed', `sd-${g.name}: ${JSON.stringify(pod?.status)}`);
      assert.equal(pod.status.reason, 'Terminated');
      assert.equal(pod.status.message, MESSAGE);
      const dt = pod.status.conditions?.find((c) => c.type === 'DisruptionTarget');
      assert.equal(dt?.status, 'True');
      assert.equal(dt.reason, 'TerminationByKubelet');
    }
    // Order without timing: low exits on SIGTERM, so the high group (which starts only after
    // mid's share is over) ends after it; mid ignores SIGTERM and is killed when its share
    // runs out (137), while low and high exit on SIGTERM (0). Mid's kill may complete after
    // high has exited (upstream moves on when a share ends), so mid's finish time is not compared.
    const terminated = async (name: string) =>
      (await getJson<Pod>(vm.cluster, ['get', 'pod', `sd-${name}`]))?.status?.containerStatuses?.[0]
        ?.state?.terminated;
    const [low, mid, high] = [
      await terminated('low'),
      await terminated('mid'),
      await terminated('high'),
    ];
    assert.equal(low?.exitCode, 0);
    assert.equal(mid?.exitCode, 137, 'mid was killed when its share ran out');
    assert.equal(high?.exitCode, 0);
    assert.ok(
      Date.parse(low.finishedAt ?? '') <= Date.parse(high.finishedAt ?? ''),
      `low ended (${String(low.finishedAt)}) before high (${String(high.finishedAt)})`,
    );
    const node = await getJson<Node>(vm.cluster, ['get', 'node', guest.name]);
    const ready = node?.status?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready.reason, 'KubeletNotReady');
    assert.equal(ready.message, 'node is shutting down');
  });
});
