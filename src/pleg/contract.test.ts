/** The Pleg contract against RelistPleg over the fake CRI runtime and FakePleg. */
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { plegContract } from './contract.ts';
import { FakePleg } from './fake.ts';
import { RelistPleg } from './generic.ts';
import { POD_UID_LABEL } from '../container/labels.ts';
import type { RuntimePodSnapshot } from '../container/pod-status.ts';
import type { PodLifecycleEvent } from './types.ts';

const START = Date.UTC(2026, 0, 1);
const IMAGE = 'registry.test/app:1';

plegContract('RelistPleg (fake CRI)', () => {
  const clock = new FakeClock(START);
  const fake = new FakeCriClient({ clock });
  fake.addImage(IMAGE, { preloaded: true });
  const events: PodLifecycleEvent[] = [];
  const pleg = new RelistPleg({
    runtime: fake.runtime,
    clock,
    logger: new MemoryLogger(),
    onEvents: (e) => events.push(...e),
  });
  const config = (uid: string): cri.PodSandboxConfig =>
    cri.PodSandboxConfig.fromPartial({
      metadata: { name: `p-${uid}`, uid, namespace: 'ns' },
      labels: { [POD_UID_LABEL]: uid },
    });
  return Promise.resolve({
    pleg,
    clock,
    events,
    runSandbox: async (uid) =>
      (await fake.runtime.runPodSandbox({ config: config(uid) })).podSandboxId,
    startContainer: async (uid, podSandboxId, name) => {
      const { containerId } = await fake.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config(uid),
        config: {
          metadata: { name, attempt: 0 },
          image: { image: IMAGE },
          labels: { [POD_UID_LABEL]: uid },
        },
      });
      await fake.runtime.startContainer({ containerId });
      return containerId;
    },
    stopContainer: async (_uid, containerId) => {
      await fake.runtime.stopContainer({ containerId, timeout: 0n });
    },
    removeContainer: async (_uid, containerId) => {
      await fake.runtime.removeContainer({ containerId });
    },
  });
});

plegContract('FakePleg', () => {
  const clock = new FakeClock(START);
  const events: PodLifecycleEvent[] = [];
  const pleg = new FakePleg({ clock, onEvents: (e) => events.push(...e) });
  const pods = new Map<string, RuntimePodSnapshot>();
  let serial = 0;
  const update = (uid: string, change: (s: RuntimePodSnapshot) => RuntimePodSnapshot): void => {
    const next = change(pods.get(uid) ?? { uid, sandboxes: [], containers: [] });
    pods.set(uid, next);
    pleg.setPod(next);
  };
  const setState = (uid: string, id: string, state: cri.ContainerState | undefined): void => {
    update(uid, (s) => ({
      ...s,
      containers: s.containers.flatMap((c) =>
        c.id !== id ? [c] : state === undefined ? [] : [{ ...c, state }],
      ),
    }));
  };
  return Promise.resolve({
    pleg,
    clock,
    events,
    runSandbox: (uid) => {
      const id = `sandbox-${++serial}`;
      const sandbox = cri.PodSandbox.fromPartial({
        id,
        state: cri.PodSandboxState.SANDBOX_READY,
        labels: { [POD_UID_LABEL]: uid },
        createdAt: BigInt(serial),
      });
      update(uid, (s) => ({ ...s, sandboxes: [...s.sandboxes, sandbox] }));
      return Promise.resolve(id);
    },
    startContainer: (uid, podSandboxId, name) => {
      const id = `container-${++serial}`;
      const container = cri.Container.fromPartial({
        id,
        podSandboxId,
        metadata: { name, attempt: 0 },
        state: cri.ContainerState.CONTAINER_RUNNING,
        labels: { [POD_UID_LABEL]: uid },
        createdAt: BigInt(serial),
      });
      update(uid, (s) => ({ ...s, containers: [...s.containers, container] }));
      return Promise.resolve(id);
    },
    stopContainer: (uid, id) => {
      setState(uid, id, cri.ContainerState.CONTAINER_EXITED);
      return Promise.resolve();
    },
    removeContainer: (uid, id) => {
      setState(uid, id, undefined);
      return Promise.resolve();
    },
  });
});
