/**
 * A real kernel clock step (issue #32, item 6) while berth runs: in the guest,
 * CLOCK_REALTIME is stepped an hour forward with `date -s`, then an hour back (to the
 * real time again: a step to before now would put the guest before the notBefore of
 * the cluster's freshly issued certificates, which no kubelet's TLS survives). Through
 * both steps the node stays Ready, its Lease keeps being renewed (a new renewTime, in
 * the guest's wall time), the pod's exec probes keep running (each appends a line to a
 * file in the container) and no container is restarted.
 *
 * berth sleeps on monotonic timers and reads wall time only to stamp what it reports,
 * so neither step should move anything; upstream's prober compares each probe with the
 * container's start time and skips probes while that lies in the future (a step back).
 *
 * Under emulation everything is slow: waits are minutes, and nothing here asserts time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import type { Pod } from 'kubernetes-types/core/v1.js';
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

describe('berth in a VM: the guest clock stepped an hour forward and back', () => {
  let vm: VmCluster;
  let guest: Guest;

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
    await startGuestNode(vm.cluster, guest, vm.network.hostIp, { driver: 'systemd' });
    // Nothing may step the clock back behind the test's back.
    await guest.exec('timedatectl set-ntp false');
  });

  after(async () => {
    await vm.stop();
    assert.deepEqual(await vm.leaks(), []);
  });

  /** The Ready condition: its status, and its message when not True. */
  const ready = async (): Promise<string> => {
    const out = await vm.cluster.kubectl([
      'get',
      'node',
      guest.name,
      '-o',
      'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}',
    ]);
    const [status = '', ...message] = out.trim().split(' ');
    return status === 'True' ? 'True' : `${status}: ${message.join(' ')}`;
  };
  const renewTime = async (): Promise<string> => {
    const lease = await getJson<Lease>(vm.cluster, [
      '-n',
      'kube-node-lease',
      'get',
      'lease',
      guest.name,
    ]);
    return lease?.spec?.renewTime ?? '';
  };
  const probeRuns = async (): Promise<number> => {
    const out = await vm.cluster.kubectl([
      'exec',
      'ticks',
      '--',
      'sh',
      '-c',
      'wc -l < /tmp/probes',
    ]);
    return Number(out.trim());
  };
  const restarts = async (): Promise<number> => {
    const pod = await getJson<Pod>(vm.cluster, ['get', 'pod', 'ticks']);
    return pod?.status?.containerStatuses?.[0]?.restartCount ?? -1;
  };

  /** After a step: probes run on, the Lease is renewed twice, the node stays Ready. */
  const survives = async (step: string): Promise<void> => {
    const runs = await probeRuns();
    const renewed = new Set([await renewTime()]);
    const notReady: string[] = [];
    await eventually(
      `after the clock step (${step}): 5 more probe runs and 2 Lease renewals`,
      async () => {
        const r = await ready();
        if (r !== 'True') notReady.push(r);
        renewed.add(await renewTime());
        return (await probeRuns()) >= runs + 5 && renewed.size >= 3 ? true : undefined;
      },
      10 * MINUTES,
      3000,
    ).catch(async (err: unknown) => {
      throw new Error(
        `${step}: probe runs ${runs} -> ${await probeRuns()}, renewTimes ${[...renewed].join(', ')}\n${await berthLogTail(guest)}`,
        { cause: err },
      );
    });
    if (notReady.length > 0)
      console.error(`${step}: berth's log\n${await berthLogTail(guest, 80)}`);
    assert.deepEqual(notReady, [], `the node stayed Ready (${step})`);
    assert.equal(await restarts(), 0, `no container restarted (${step})`);
  };

  test('the node stays Ready, the Lease renews and probes run through +1 h and -1 h', async () => {
    await applyJson(vm.cluster, {
      ...busyboxPod(vm.cluster, 'ticks', guest.name, { grace: 1 }),
      spec: {
        nodeName: guest.name,
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: vm.cluster.images.busyboxLocal,
            imagePullPolicy: 'IfNotPresent',
            command: ['sleep', '36000'],
            readinessProbe: {
              exec: { command: ['sh', '-c', 'echo x >> /tmp/probes'] },
              periodSeconds: 5,
            },
            livenessProbe: { exec: { command: ['true'] }, periodSeconds: 5 },
          },
        ],
      },
    });
    await waitForPod(
      vm.cluster,
      'default',
      'ticks',
      'Running',
      isRunningAndReady,
      10 * MINUTES,
    ).catch(async (err: unknown) => {
      throw new Error(`pod not Running; berth's log:\n${await berthLogTail(guest)}`, {
        cause: err,
      });
    });
    const before = (await guest.sh('date -u +%s')).trim();
    await guest.sh('date -s "+1 hour" >/dev/null');
    const stepped = Number((await guest.sh('date -u +%s')).trim()) - Number(before);
    assert.ok(stepped >= 3600, `the guest clock moved ${stepped} s`);
    await survives('+1 h');
    await guest.sh('date -s "-1 hour" >/dev/null');
    await survives('-1 h');
  });
});
