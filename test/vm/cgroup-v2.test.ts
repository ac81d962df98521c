/**
 * berth on a node that looks like production (issue #31 item 2): systemd as PID 1 on a
 * pure cgroup v2 hierarchy, in a guest VM.
 *
 * 1. cgroupDriver: systemd with containerd's SystemdCgroup = true: the CgroupManager
 *    contract against the guest's real systemd and cgroupfs v2 (the unit files, run in
 *    the guest); Guaranteed / Burstable / BestEffort pods; the QoS and pod slices with
 *    upstream's names, active in systemd with berth's limits, and the same limits in the
 *    cgroup files of the pod's slice and of the container (cpu.max, cpu.weight,
 *    memory.max, pids.max from podPidsLimit); a daemon-reload keeps them; the pod
 *    slice is stopped once the pod is deleted.
 * 2. cgroupDriver: cgroupfs on the same guest with SystemdCgroup = false: the same pods
 *    under /sys/fs/cgroup/kubepods with the same limits; the pod cgroup is removed.
 *
 * The node's memory.available comes from /proc/meminfo (src/stats/host.ts) and the pods'
 * working sets from the runtime, so no eviction signal reads a cgroup file itself; the
 * Summary API's pod memory (containerd reading memory.current/memory.stat on v2) is
 * checked to be there.
 *
 * Everything runs under emulation (~10x slower than the host): waits are long and
 * nothing is timed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Container, Node, Pod } from 'kubernetes-types/core/v1.js';
import { parseQuantity } from '../../src/util/quantity.ts';
import { applyJson, busyboxPod, waitForPod } from '../harness/kube-helpers.ts';
import { waitFor } from '../harness/process.ts';
import { startVmCluster, type VmCluster } from '../harness/vm-cluster.ts';
import {
  berthLogTail,
  startGuestContainerd,
  startGuestNode,
  type GuestImages,
} from '../harness/vm-node.ts';
import type { Guest } from '../harness/vm.ts';

const POD_TIMEOUT_MS = 600_000;
const PIDS_LIMIT = 100;
/** Upstream's CPUSharesToCPUWeight, as runc and berth convert. */
const weight = (shares: number): number => Math.floor(1 + ((shares - 2) * 9999) / 262142);

describe('cgroup v2 with systemd as PID 1 (guest VM)', { timeout: 3_600_000 }, () => {
  let vm: VmCluster;
  let g: Guest;
  let images: GuestImages;

  before(async () => {
    vm = await startVmCluster({
      guests: 1,
      log: (m) => {
        console.error(`[vm] ${m}`);
      },
    });
    const [guest] = vm.guests;
    if (guest === undefined) throw new Error('no guest started');
    g = guest;
    ({ images } = await startGuestNode(vm.cluster, g, vm.network.hostIp, {
      driver: 'systemd',
      extraConfig: [`podPidsLimit: ${PIDS_LIMIT}`],
    }));
  });

  after(async () => {
    await vm.stop();
    assert.deepEqual(await vm.leaks(), []);
  });

  const kubectl = (args: string[]): Promise<string> =>
    vm.cluster.kubectl(['-n', 'default', ...args]);
  const inPod = async (pod: string, file: string): Promise<string> =>
    (await kubectl(['exec', pod, '--', 'cat', file])).trim();
  const guestFile = async (path: string): Promise<string> => (await g.sh(`cat ${path}`)).trim();

  function pod(name: string, resources: Container['resources']): Pod {
    const base = busyboxPod(vm.cluster, name, g.name, {
      image: images.busybox,
      imagePullPolicy: 'Never',
      grace: 1,
    });
    const [c] = base.spec?.containers ?? [];
    return { ...base, spec: { ...base.spec, containers: [{ ...c, resources } as Container] } };
  }

  /** Guaranteed (250m, 48Mi), Burstable (100m request, 64Mi limit), BestEffort; Running. */
  async function threePods(): Promise<{ g: Pod; b: Pod; e: Pod }> {
    await applyJson(vm.cluster, pod('qos-g', { limits: { cpu: '250m', memory: '48Mi' } }));
    await applyJson(
      vm.cluster,
      pod('qos-b', { requests: { cpu: '100m' }, limits: { memory: '64Mi' } }),
    );
    await applyJson(vm.cluster, pod('qos-e', {}));
    const running = (name: string): Promise<Pod> =>
      waitForPod(
        vm.cluster,
        'default',
        name,
        'Running',
        (p) => p.status?.phase === 'Running',
        POD_TIMEOUT_MS,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${await berthLogTail(g)}`);
      });
    const pods = {
      g: await running('qos-g'),
      b: await running('qos-b'),
      e: await running('qos-e'),
    };
    assert.equal(pods.g.status?.qosClass, 'Guaranteed');
    assert.equal(pods.b.status?.qosClass, 'Burstable');
    assert.equal(pods.e.status?.qosClass, 'BestEffort');
    return pods;
  }

  /** The container's own cgroup (its cgroup namespace root) carries its limits. */
  async function containerLimits(): Promise<void> {
    assert.equal(await inPod('qos-g', '/sys/fs/cgroup/cpu.max'), '25000 100000');
    assert.equal(await inPod('qos-g', '/sys/fs/cgroup/memory.max'), String(48 * 1024 * 1024));
    assert.equal(await inPod('qos-g', '/sys/fs/cgroup/cpu.weight'), String(weight(256)));
    assert.equal(await inPod('qos-b', '/sys/fs/cgroup/cpu.max'), 'max 100000');
    assert.equal(await inPod('qos-b', '/sys/fs/cgroup/memory.max'), String(64 * 1024 * 1024));
    assert.equal(await inPod('qos-b', '/sys/fs/cgroup/cpu.weight'), String(weight(102)));
    assert.equal(await inPod('qos-e', '/sys/fs/cgroup/memory.max'), 'max');
    assert.equal(await inPod('qos-e', '/sys/fs/cgroup/cpu.weight'), String(weight(2)));
    await memoryQos();
  }

  /**
   * The node-dependent memory keys, as upstream's kuberuntime sets them on v2: the whole
   * container killed on OOM (memory.oom.group), MemoryQoS (on by default in v1.37) with
   * memory.min/low 0 and memory.high = floor(0.9 * allocatable / page) * page for a
   * container without a memory limit or request, none where request equals limit; and
   * the OOM score adjust by QoS class and request share of the node's memory.
   */
  async function memoryQos(): Promise<void> {
    const node = JSON.parse(
      await vm.cluster.kubectl(['get', 'node', g.name, '-o', 'json']),
    ) as Node;
    const allocatable = Math.floor(parseQuantity(node.status?.allocatable?.['memory'] ?? '0'));
    const capacity = Math.floor(parseQuantity(node.status?.capacity?.['memory'] ?? '0'));
    assert.ok(allocatable > 0 && capacity > 0);
    for (const name of ['qos-g', 'qos-b', 'qos-e']) {
      assert.equal(await inPod(name, '/sys/fs/cgroup/memory.oom.group'), '1', name);
      assert.equal(await inPod(name, '/sys/fs/cgroup/memory.min'), '0', name);
      assert.equal(await inPod(name, '/sys/fs/cgroup/memory.low'), '0', name);
    }
    assert.equal(await inPod('qos-g', '/sys/fs/cgroup/memory.high'), 'max');
    // qos-b's memory request defaults to its limit: equal, so no throttle either.
    assert.equal(await inPod('qos-b', '/sys/fs/cgroup/memory.high'), 'max');
    assert.equal(
      await inPod('qos-e', '/sys/fs/cgroup/memory.high'),
      String(Math.floor((0.9 * allocatable) / 4096) * 4096),
    );
    assert.equal(await inPod('qos-g', '/proc/1/oom_score_adj'), '-997');
    assert.equal(await inPod('qos-e', '/proc/1/oom_score_adj'), '1000');
    const burstable = 1000 - Math.trunc((1000 * 64 * 1024 * 1024) / capacity);
    assert.equal(await inPod('qos-b', '/proc/1/oom_score_adj'), String(Math.min(999, burstable)));
  }

  /** The pod cgroups' files in the guest: `dirs` maps g/b/e to their directories. */
  async function podCgroupLimits(dirs: { g: string; b: string; e: string }): Promise<void> {
    assert.equal(await guestFile(`${dirs.g}/cpu.max`), '25000 100000');
    assert.equal(await guestFile(`${dirs.g}/memory.max`), String(48 * 1024 * 1024));
    assert.equal(await guestFile(`${dirs.g}/cpu.weight`), String(weight(256)));
    assert.equal(await guestFile(`${dirs.b}/cpu.max`), 'max 100000');
    assert.equal(await guestFile(`${dirs.b}/memory.max`), String(64 * 1024 * 1024));
    assert.equal(await guestFile(`${dirs.b}/cpu.weight`), String(weight(102)));
    assert.equal(await guestFile(`${dirs.e}/memory.max`), 'max');
    assert.equal(await guestFile(`${dirs.e}/cpu.weight`), String(weight(2)));
    for (const d of Object.values(dirs))
      assert.equal(await guestFile(`${d}/pids.max`), String(PIDS_LIMIT));
  }

  async function deleteAll(): Promise<void> {
    await kubectl(['delete', 'pod', 'qos-g', 'qos-b', 'qos-e', '--wait=true', '--timeout=600s']);
  }

  async function gone(path: string): Promise<void> {
    await waitFor(`${path} removed`, async () => (await g.exec(`test -e ${path}`)).exitCode !== 0, {
      timeoutMs: POD_TIMEOUT_MS,
      intervalMs: 2000,
      describe: () => berthLogTail(g),
    });
  }

  test('the CgroupManager contract against the guest systemd and cgroupfs v2', async () => {
    assert.equal(await guestFile('/proc/1/comm'), 'systemd');
    assert.equal((await g.sh('stat -fc %T /sys/fs/cgroup')).trim(), 'cgroup2fs');
    const out = await g.sh(
      'cd /berth && node_modules/.bin/node --test --test-reporter=spec src/cm/systemd.test.ts src/cm/cgroupfs.test.ts 2>&1',
      { timeoutMs: 900_000 },
    );
    assert.match(out, /✔ CgroupManager contract: systemd v2 \(this host's systemd\)/);
    assert.match(out, /✔ CgroupManager contract: cgroupfs v2 \(this host\)/);
    assert.match(out, /✔ v2: controllers enabled down the tree/);
    assert.match(out, /ℹ fail 0/);
  });

  test('systemd driver: QoS and pod slices made by berth with the pods limits', async () => {
    const pods = await threePods();
    const uid = (p: Pod): string => (p.metadata?.uid ?? '').replace(/-/g, '_');
    const unit = {
      g: `kubepods-pod${uid(pods.g)}.slice`,
      b: `kubepods-burstable-pod${uid(pods.b)}.slice`,
      e: `kubepods-besteffort-pod${uid(pods.e)}.slice`,
    };
    const root = '/sys/fs/cgroup/kubepods.slice';
    const dirs = {
      g: `${root}/${unit.g}`,
      b: `${root}/kubepods-burstable.slice/${unit.b}`,
      e: `${root}/kubepods-besteffort.slice/${unit.e}`,
    };
    await containerLimits();
    await podCgroupLimits(dirs);
    // The containers run in the runtime's scopes inside the pods' slices.
    for (const d of Object.values(dirs))
      assert.match(await g.sh(`ls ${d}`), /cri-containerd-[0-9a-f]{64}\.scope/);
    // The slices are systemd's units, active, with berth's limits as their properties.
    const show = async (u: string): Promise<Record<string, string>> =>
      Object.fromEntries(
        (
          await g.sh(
            `systemctl show ${u} -p ActiveState -p Wants -p TasksMax -p MemoryMax -p CPUQuotaPerSecUSec -p CPUWeight`,
          )
        )
          .trim()
          .split('\n')
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
    const gShow = await show(unit.g);
    assert.equal(gShow['ActiveState'], 'active');
    assert.equal(gShow['TasksMax'], String(PIDS_LIMIT));
    assert.equal(gShow['MemoryMax'], String(48 * 1024 * 1024));
    assert.equal(gShow['CPUQuotaPerSecUSec'], '250ms');
    assert.equal(gShow['CPUWeight'], String(weight(256)));
    assert.match(gShow['Wants'] ?? '', /kubepods\.slice/);
    assert.match((await show(unit.b))['Wants'] ?? '', /kubepods-burstable\.slice/);
    for (const tier of ['kubepods.slice', 'kubepods-burstable.slice', 'kubepods-besteffort.slice'])
      assert.equal((await show(tier))['ActiveState'], 'active', tier);
    // The tiers: kubepods gets the allocatable (2 CPUs here), besteffort the minimum.
    assert.equal(await guestFile(`${root}/cpu.weight`), String(weight(2048)));
    assert.notEqual(await guestFile(`${root}/memory.max`), 'max');
    assert.equal(
      await guestFile(`${root}/kubepods-besteffort.slice/cpu.weight`),
      String(weight(2)),
    );
    // systemd re-applying its units' properties keeps what berth set.
    await g.sh('systemctl daemon-reload');
    await podCgroupLimits(dirs);
    // The pods' memory in the Summary API: containerd reads the v2 memory files.
    const summary = JSON.parse(
      await vm.cluster.kubectl(['get', '--raw', `/api/v1/nodes/${g.name}/proxy/stats/summary`]),
    ) as { pods?: { podRef: { name: string }; memory?: { workingSetBytes?: number } }[] };
    const gSummary = summary.pods?.find((p) => p.podRef.name === 'qos-g');
    assert.ok((gSummary?.memory?.workingSetBytes ?? 0) > 0, JSON.stringify(gSummary));

    await deleteAll();
    for (const d of Object.values(dirs)) await gone(d);
    // Stopped transient units are unloaded by systemd's garbage collection.
    for (const u of Object.values(unit))
      await waitFor(
        `${u} unloaded`,
        async () => /LoadState=not-found/.test(await g.sh(`systemctl show ${u} -p LoadState`)),
        { timeoutMs: POD_TIMEOUT_MS, intervalMs: 2000 },
      );
  });

  test('cgroupfs driver on cgroup v2: the same limits under /sys/fs/cgroup/kubepods', async () => {
    await startGuestContainerd(g, { driver: 'cgroupfs' });
    await g.sh(
      "sed -i 's/^cgroupDriver: systemd$/cgroupDriver: cgroupfs/' /etc/berth/config.yaml && systemctl restart berth",
    );
    const pods = await threePods();
    const root = '/sys/fs/cgroup/kubepods';
    const dirs = {
      g: `${root}/pod${pods.g.metadata?.uid ?? ''}`,
      b: `${root}/burstable/pod${pods.b.metadata?.uid ?? ''}`,
      e: `${root}/besteffort/pod${pods.e.metadata?.uid ?? ''}`,
    };
    await containerLimits();
    await podCgroupLimits(dirs);
    for (const c of ['cpu', 'memory', 'pids'])
      assert.ok(
        (await guestFile(`${root}/cgroup.subtree_control`)).split(/\s+/).includes(c),
        `${c} enabled below kubepods`,
      );
    assert.equal(await guestFile(`${root}/cpu.weight`), String(weight(2048)));
    assert.equal(await guestFile(`${root}/besteffort/cpu.weight`), String(weight(2)));
    await deleteAll();
    for (const d of Object.values(dirs)) await gone(d);
  });
});
