import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { RuntimeContainer } from '../container/pod-status.ts';
import { runtimeContainer as container, runtimeStatus as runtime } from './testing.ts';
import { generatePodStatus } from './generate.ts';

const NOW = new Date('2026-01-01T00:00:10Z');

function pod(restartPolicy: 'Always' | 'OnFailure' | 'Never', names = ['main']): Pod {
  return {
    metadata: { uid: 'u1', name: 'p', namespace: 'ns' },
    spec: { restartPolicy, containers: names.map((name) => ({ name, image: 'busybox:1' })) },
    status: { conditions: [{ type: 'PodScheduled', status: 'True' }] },
  };
}

function status(
  p: Pod,
  containers: RuntimeContainer[],
  waiting: [string, { reason: string; message: string }][] = [],
) {
  return generatePodStatus({
    pod: p,
    runtime: runtime(containers),
    waiting: new Map(waiting),
    runtimeName: 'containerd',
    hostIPs: ['127.0.0.1'],
    now: NOW,
  });
}

describe('generatePodStatus', () => {
  test('nothing created yet: Pending, waiting ContainerCreating, PodScheduled kept', () => {
    const s = status(pod('Always'), []);
    assert.equal(s.phase, 'Pending');
    assert.equal(s.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
    assert.ok(s.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'True'));
    assert.equal(s.podIP, '10.88.0.5');
    assert.equal(s.qosClass, 'BestEffort');
  });

  test("hostNetwork: the node's IPs are the pod's, as upstream (the sandbox has none)", () => {
    const p = pod('Always');
    const hostNet: Pod = {
      ...p,
      spec: { ...p.spec, containers: p.spec?.containers ?? [], hostNetwork: true },
    };
    const rt = runtime([container('main', 'running')]);
    const noIp = { ...rt, sandboxes: rt.sandboxes.map((sb) => ({ ...sb, ip: '', ips: [] })) };
    const s = generatePodStatus({
      pod: hostNet,
      runtime: noIp,
      waiting: new Map(),
      runtimeName: 'containerd',
      hostIPs: ['192.0.2.7'],
      now: NOW,
    });
    assert.equal(s.podIP, '192.0.2.7');
    assert.deepEqual(s.podIPs, [{ ip: '192.0.2.7' }]);
    assert.equal(s.hostIP, '192.0.2.7');
  });

  test('running: Running, Ready, container ID with the runtime name, startedAt', () => {
    const s = status(pod('Always'), [container('main', 'running')]);
    assert.equal(s.phase, 'Running');
    assert.equal(s.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    const cs = s.containerStatuses?.[0];
    assert.equal(cs?.containerID, 'containerd://main-0');
    assert.equal(cs?.imageID, 'sha256:abc');
    assert.equal(cs?.state?.running?.startedAt, '1970-01-01T00:00:02Z');
  });

  test('restartPolicy Never: exit 0 -> Succeeded, exit 3 -> Failed with the exit code', () => {
    assert.equal(status(pod('Never'), [container('main', 'exited')]).phase, 'Succeeded');
    const failed = status(pod('Never'), [container('main', 'exited', { exitCode: 3 })]);
    assert.equal(failed.phase, 'Failed');
    assert.equal(failed.containerStatuses?.[0]?.state?.terminated?.exitCode, 3);
    assert.equal(failed.containerStatuses?.[0]?.state?.terminated?.reason, 'Error');
  });

  test('OnFailure: a failure stays Running (it will rerun); success -> Succeeded', () => {
    assert.equal(
      status(pod('OnFailure'), [container('main', 'exited', { exitCode: 1 })]).phase,
      'Running',
    );
    assert.equal(status(pod('OnFailure'), [container('main', 'exited')]).phase, 'Succeeded');
  });

  test('CrashLoopBackOff: waiting with the reason, last exit in lastState, restartCount of the newest', () => {
    const s = status(
      pod('Always'),
      [
        container('main', 'exited', { exitCode: 1, attempt: 2 }),
        container('main', 'exited', { exitCode: 1, attempt: 1 }),
      ],
      [
        [
          'main',
          {
            reason: 'CrashLoopBackOff',
            message: 'back-off 40s restarting failed container=main pod=p_ns(u1)',
          },
        ],
      ],
    );
    const cs = s.containerStatuses?.[0];
    assert.equal(s.phase, 'Running');
    assert.equal(cs?.state?.waiting?.reason, 'CrashLoopBackOff');
    assert.equal(cs?.lastState?.terminated?.exitCode, 1);
    assert.equal(cs?.restartCount, 2);
  });

  test('a terminal phase never changes back', () => {
    const base = pod('Always');
    const p: Pod = { ...base, status: { ...base.status, phase: 'Failed' } };
    assert.equal(status(p, [container('main', 'running')]).phase, 'Failed');
  });

  test('waiting reasons from the sync loop (ErrImagePull) show on containers without an instance', () => {
    const s = status(
      pod('Always', ['a', 'b']),
      [container('a', 'running')],
      [['b', { reason: 'ErrImagePull', message: 'nope' }]],
    );
    assert.equal(s.phase, 'Pending');
    assert.equal(s.containerStatuses?.[1]?.state?.waiting?.reason, 'ErrImagePull');
    assert.equal(
      s.conditions?.find((c) => c.type === 'ContainersReady')?.message,
      'containers with unready status: [b]',
    );
  });
  test('readiness gates: Ready waits for every gate condition to be True, in upstream words', () => {
    const gated = (conditions: { type: string; status: string }[]): Pod => ({
      ...pod('Always'),
      spec: {
        ...pod('Always').spec,
        containers: [{ name: 'main', image: 'busybox:1' }],
        readinessGates: [{ conditionType: 'example.com/lb' }, { conditionType: 'example.com/dns' }],
      },
      status: { conditions: [{ type: 'PodScheduled', status: 'True' }, ...conditions] },
    });
    const ready = (p: Pod) => status(p, [container('main', 'running')]).conditions ?? [];
    const none = ready(gated([]));
    assert.equal(none.find((c) => c.type === 'ContainersReady')?.status, 'True');
    const r = none.find((c) => c.type === 'Ready');
    assert.equal(r?.status, 'False');
    assert.equal(r?.reason, 'ReadinessGatesNotReady');
    assert.equal(
      r?.message,
      'corresponding condition of pod readiness gate "example.com/lb" does not exist., ' +
        'corresponding condition of pod readiness gate "example.com/dns" does not exist.',
    );
    const half = ready(
      gated([
        { type: 'example.com/lb', status: 'True' },
        { type: 'example.com/dns', status: 'False' },
      ]),
    ).find((c) => c.type === 'Ready');
    assert.equal(
      half?.message,
      'the status of pod readiness gate "example.com/dns" is not "True", but False',
    );
    const all = ready(
      gated([
        { type: 'example.com/lb', status: 'True' },
        { type: 'example.com/dns', status: 'True' },
      ]),
    );
    assert.equal(all.find((c) => c.type === 'Ready')?.status, 'True');
    // The gate conditions belong to their controller and are carried as they are.
    assert.equal(all.find((c) => c.type === 'example.com/dns')?.status, 'True');
    // Containers not ready: Ready gives ContainersReady's reason, not the gates'.
    const notRunning = status(gated([]), []).conditions?.find((c) => c.type === 'Ready');
    assert.equal(notRunning?.reason, 'ContainersNotReady');
  });
});
