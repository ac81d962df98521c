/**
 * Converters from CRI responses to RuntimePodStatus, grouping by pod, newest-first
 * ordering and restart counts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cri } from '../cri/index.ts';
import { containerAnnotations, containerLabels, sandboxLabels } from './labels.ts';
import {
  containerFromList,
  containerFromStatus,
  latestContainer,
  nanosToMillis,
  nextRestartCount,
  runtimePodsFromLists,
  sandboxFromList,
  sandboxFromStatus,
} from './pod-status.ts';
import { instance, runtimeStatus, testPod } from './testing.ts';

const pod = testPod();
const main = pod.spec?.containers[0] ?? { name: 'main' };
const SEC = 1_000_000_000n;

describe('sandbox converters', () => {
  test('from ListPodSandbox: state, attempt, creation time; no network facts', () => {
    const listed = cri.PodSandbox.fromPartial({
      id: 'sb1',
      metadata: { name: 'web', namespace: 'default', uid: 'uid-1', attempt: 2 },
      state: cri.PodSandboxState.SANDBOX_READY,
      createdAt: 1_700_000_000n * SEC + 123_456_789n,
      labels: sandboxLabels(pod),
    });
    assert.deepEqual(sandboxFromList(listed), {
      id: 'sb1',
      state: 'ready',
      attempt: 2,
      createdAt: 1_700_000_000_123,
      ips: [],
    });
    assert.equal(
      sandboxFromList({ ...listed, state: cri.PodSandboxState.SANDBOX_NOTREADY }).state,
      'notready',
    );
    assert.equal(
      sandboxFromList({ ...listed, state: cri.PodSandboxState.UNRECOGNIZED }).state,
      'notready',
    );
  });

  test('from PodSandboxStatus: IPs, primary first, and network mode', () => {
    const status = cri.PodSandboxStatus.fromPartial({
      id: 'sb1',
      metadata: { attempt: 0 },
      state: cri.PodSandboxState.SANDBOX_READY,
      createdAt: 5n * SEC,
      network: { ip: '10.1.0.5', additionalIps: [{ ip: 'fd00::5' }] },
      linux: { namespaces: { options: { network: cri.NamespaceMode.POD } } },
    });
    assert.deepEqual(sandboxFromStatus(status), {
      id: 'sb1',
      state: 'ready',
      attempt: 0,
      createdAt: 5_000,
      ip: '10.1.0.5',
      ips: ['10.1.0.5', 'fd00::5'],
      network: 'pod',
    });
    const host = sandboxFromStatus({
      ...status,
      network: { ip: '', additionalIps: [] },
      linux: {
        namespaces: {
          options: { ...cri.NamespaceOption.fromPartial({}), network: cri.NamespaceMode.NODE },
        },
      },
    });
    assert.equal(host.network, 'node');
    assert.equal(host.ip, undefined);
    assert.deepEqual(host.ips, []);
  });
});

describe('container converters', () => {
  const labels = containerLabels(pod, main);
  const annotations = containerAnnotations(pod, main, { restartCount: 4 });

  test('from ListContainers: identity from labels/annotations', () => {
    const listed = cri.Container.fromPartial({
      id: 'c1',
      podSandboxId: 'sb1',
      metadata: { name: 'main', attempt: 4 },
      image: { image: 'registry.test/main:1' },
      imageRef: 'sha256:abc',
      state: cri.ContainerState.CONTAINER_RUNNING,
      createdAt: 7n * SEC,
      labels,
      annotations,
    });
    assert.deepEqual(containerFromList(listed), {
      id: 'c1',
      name: 'main',
      state: 'running',
      attempt: 4,
      createdAt: 7_000,
      hash: annotations['io.kubernetes.container.hash'],
      image: 'registry.test/main:1',
      imageRef: 'sha256:abc',
      sandboxId: 'sb1',
    });
  });

  test('from ContainerStatus: exit code, reason, message and times', () => {
    const status = cri.ContainerStatus.fromPartial({
      id: 'c1',
      metadata: { name: 'main', attempt: 4 },
      state: cri.ContainerState.CONTAINER_EXITED,
      createdAt: 7n * SEC,
      startedAt: 8n * SEC,
      finishedAt: 9n * SEC,
      exitCode: 137,
      reason: 'OOMKilled',
      message: 'out of memory',
      image: { image: 'registry.test/main:1' },
      imageRef: 'sha256:abc',
      labels,
      annotations,
    });
    assert.deepEqual(containerFromStatus(status, 'sb1'), {
      id: 'c1',
      name: 'main',
      state: 'exited',
      attempt: 4,
      exitCode: 137,
      reason: 'OOMKilled',
      message: 'out of memory',
      createdAt: 7_000,
      startedAt: 8_000,
      finishedAt: 9_000,
      hash: annotations['io.kubernetes.container.hash'],
      image: 'registry.test/main:1',
      imageRef: 'sha256:abc',
      sandboxId: 'sb1',
    });
  });

  test('a running container has no exit code and no finish time', () => {
    const status = cri.ContainerStatus.fromPartial({
      id: 'c1',
      state: cri.ContainerState.CONTAINER_RUNNING,
      startedAt: 8n * SEC,
      labels,
      annotations,
    });
    const converted = containerFromStatus(status, 'sb1');
    assert.equal(converted.exitCode, undefined);
    assert.equal(converted.finishedAt, undefined);
    assert.equal(converted.reason, undefined);
    assert.equal(converted.startedAt, 8_000);
  });

  test('states map one to one; unrecognised is unknown', () => {
    const table: [cri.ContainerState, string][] = [
      [cri.ContainerState.CONTAINER_CREATED, 'created'],
      [cri.ContainerState.CONTAINER_RUNNING, 'running'],
      [cri.ContainerState.CONTAINER_EXITED, 'exited'],
      [cri.ContainerState.CONTAINER_UNKNOWN, 'unknown'],
      [cri.ContainerState.UNRECOGNIZED, 'unknown'],
    ];
    for (const [state, want] of table) {
      assert.equal(containerFromList(cri.Container.fromPartial({ id: 'c', state })).state, want);
    }
  });

  test('without berth annotations: metadata attempt, empty hash', () => {
    const foreign = cri.Container.fromPartial({
      id: 'c1',
      metadata: { name: 'main', attempt: 2 },
      labels,
      annotations: { 'io.kubernetes.container.restartCount': 'garbled' },
    });
    const converted = containerFromList(foreign);
    assert.equal(converted.attempt, 2);
    assert.equal(converted.hash, '');
  });

  test('nanoseconds beyond 2^53 convert without loss at ms precision', () => {
    assert.equal(nanosToMillis(1_900_000_000_987_654_321n), 1_900_000_000_987);
    assert.equal(nanosToMillis(0n), 0);
  });
});

describe('grouping and order', () => {
  test('groups by pod UID, newest first, and skips objects of no pod', () => {
    const sandbox = (id: string, seconds: bigint, uid = 'uid-1'): cri.PodSandbox =>
      cri.PodSandbox.fromPartial({
        id,
        metadata: { name: 'web', namespace: 'default', uid, attempt: Number(seconds) },
        createdAt: seconds * SEC,
      });
    const container = (id: string, seconds: bigint, uid = 'uid-1'): cri.Container =>
      cri.Container.fromPartial({
        id,
        metadata: { name: 'main' },
        createdAt: seconds * SEC,
        labels: containerLabelsOf(uid),
      });
    const containerLabelsOf = (uid: string): Record<string, string> => ({
      'io.kubernetes.pod.uid': uid,
      'io.kubernetes.pod.name': 'web',
      'io.kubernetes.pod.namespace': 'default',
      'io.kubernetes.container.name': 'main',
    });
    const pods = runtimePodsFromLists(
      [
        sandbox('old', 1n),
        sandbox('new', 2n),
        sandbox('other', 1n, 'uid-2'),
        cri.PodSandbox.fromPartial({ id: 'x' }),
      ],
      [container('c-old', 3n), container('c-new', 4n), cri.Container.fromPartial({ id: 'stray' })],
    );
    assert.deepEqual([...pods.keys()].sort(), ['uid-1', 'uid-2']);
    const mine = pods.get('uid-1');
    assert.ok(mine);
    assert.deepEqual(
      mine.sandboxes.map((s) => s.id),
      ['new', 'old'],
    );
    assert.deepEqual(
      mine.containers.map((c) => c.id),
      ['c-new', 'c-old'],
    );
    assert.equal(mine.name, 'web');
    assert.equal(mine.namespace, 'default');
    assert.deepEqual(pods.get('uid-2')?.containers, []);
  });

  test('a pod known only from its containers is still listed', () => {
    const pods = runtimePodsFromLists(
      [],
      [cri.Container.fromPartial({ id: 'c', labels: containerLabels(pod, main) })],
    );
    assert.equal(pods.get('uid-1')?.name, 'web');
  });

  test('latestContainer and nextRestartCount', () => {
    const status = runtimeStatus(
      [],
      [
        instance('main', 'exited', { attempt: 0 }),
        instance('main', 'exited', { attempt: 2 }),
        instance('main', 'exited', { attempt: 1 }),
        instance('main', 'running', { attempt: 3, sandboxId: 'sb2' }),
      ],
    );
    assert.equal(latestContainer(status, 'main')?.attempt, 3);
    assert.equal(latestContainer(status, 'main', 'sb1')?.attempt, 2);
    assert.equal(latestContainer(status, 'other'), undefined);
    assert.equal(nextRestartCount(status, 'main'), 4);
    assert.equal(nextRestartCount(status, 'other'), 0);
  });

  test('equal creation times: the higher attempt is newer', () => {
    const status = runtimeStatus(
      [],
      [
        instance('main', 'exited', { attempt: 0, createdAt: 5, id: 'b' }),
        instance('main', 'exited', { attempt: 1, createdAt: 5, id: 'a' }),
      ],
    );
    assert.equal(latestContainer(status, 'main')?.attempt, 1);
  });
});
