/**
 * Contract: the runtime describes itself (Version, Status, RuntimeConfig), streams
 * container events where it has them, and cancels calls on the caller's signal.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CriAbortedError, CriUnimplementedError, cri } from '../../src/cri/index.ts';
import type { RuntimeRef } from './cri-runtime.contract.ts';
import { PROGRAMS } from './cri-programs.ts';
import { containerConfig, until } from './support.ts';

const E = cri.ContainerEventType;

/** Registers the runtime-level tests. */
export function runtimeContract(rt: RuntimeRef): void {
  test('Version names the runtime and CRI v1', async () => {
    const v = await rt().client.runtime.version({ version: '0.1.0' });
    assert.equal(v.runtimeName, 'containerd');
    assert.equal(v.runtimeApiVersion, 'v1');
    assert.notEqual(v.runtimeVersion, '');
  });

  test('Status reports the runtime and its network ready', async () => {
    const { status } = await rt().client.runtime.status({});
    const ready = (type: string): boolean | undefined =>
      status?.conditions.find((c) => c.type === type)?.status;
    assert.equal(ready('RuntimeReady'), true);
    assert.equal(ready('NetworkReady'), true);
  });

  test('RuntimeConfig and GetContainerEvents: served, or typed as unimplemented', async () => {
    const { client, hasEvents } = rt();
    if (hasEvents) {
      const rc = await client.runtime.runtimeConfig({});
      // Both set-ups run their containers under cgroupfs.
      assert.equal(rc.linux?.cgroupDriver, cri.CgroupDriver.CGROUPFS);
      return;
    }
    await assert.rejects(client.runtime.runtimeConfig({}), CriUnimplementedError);
    const iterate = async (): Promise<void> => {
      for await (const e of client.runtime.getContainerEvents())
        assert.fail(`unexpected event ${e.containerId}`);
    };
    await assert.rejects(iterate(), CriUnimplementedError);
  });

  test('container events follow a sandbox and its container through their lives', async (t) => {
    const { client, hasEvents, images, credentials, podConfig } = rt();
    if (!hasEvents) {
      t.skip('the runtime has no GetContainerEvents');
      return;
    }
    const controller = new AbortController();
    const events: cri.ContainerEventResponse[] = [];
    const reading = (async () => {
      for await (const e of client.runtime.getContainerEvents({ signal: controller.signal }))
        events.push(e);
    })();
    const { imageRef } = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { ...credentials },
    });
    const config = podConfig('events');
    const { podSandboxId } = await client.runtime.runPodSandbox({ config });
    const { containerId } = await client.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: containerConfig('main', imageRef, PROGRAMS.sleeper.command),
    });
    await client.runtime.startContainer({ containerId });
    // No grace period: the runtime kills the process (137).
    await client.runtime.stopContainer({ containerId, timeout: 0n });
    await client.runtime.removeContainer({ containerId });
    await client.runtime.stopPodSandbox({ podSandboxId });
    await client.runtime.removePodSandbox({ podSandboxId });
    const who = (id: string): string => (id === podSandboxId ? 'sandbox' : 'container');
    const ours = (): cri.ContainerEventResponse[] =>
      events.filter((e) => e.containerId === podSandboxId || e.containerId === containerId);
    await until('the sandbox deleted event', () =>
      Promise.resolve(
        ours().some(
          (e) =>
            e.containerId === podSandboxId && e.containerEventType === E.CONTAINER_DELETED_EVENT,
        )
          ? true
          : undefined,
      ),
    );
    controller.abort();
    await reading; // ends quietly on abort

    assert.deepEqual(
      ours().map((e) => `${who(e.containerId)} ${e.containerEventType}`),
      [
        `sandbox ${E.CONTAINER_CREATED_EVENT}`,
        `sandbox ${E.CONTAINER_STARTED_EVENT}`,
        `container ${E.CONTAINER_CREATED_EVENT}`,
        `container ${E.CONTAINER_STARTED_EVENT}`,
        `container ${E.CONTAINER_STOPPED_EVENT}`,
        `container ${E.CONTAINER_DELETED_EVENT}`,
        `sandbox ${E.CONTAINER_STOPPED_EVENT}`,
        `sandbox ${E.CONTAINER_DELETED_EVENT}`,
      ],
    );
    for (const e of ours()) assert.equal(e.podSandboxStatus?.id, podSandboxId);
    const times = ours().map((e) => e.createdAt);
    assert.deepEqual(
      times,
      [...times].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
      'events in time order',
    );
    const stopped = ours().find(
      (e) => e.containerId === containerId && e.containerEventType === E.CONTAINER_STOPPED_EVENT,
    );
    const status = stopped?.containersStatuses.find((s) => s.id === containerId);
    assert.equal(status?.state, cri.ContainerState.CONTAINER_EXITED);
    assert.equal(status.exitCode, 137);
  });

  test('an aborted call rejects with a typed abort error', async () => {
    const { client } = rt();
    const controller = new AbortController();
    const pending = client.runtime.listContainers({}, { signal: controller.signal });
    controller.abort();
    await assert.rejects(pending, CriAbortedError);
    await assert.rejects(
      client.runtime.version({}, { signal: controller.signal }),
      CriAbortedError,
    );
    // An event stream asked for with an aborted signal ends before it opens, on any runtime.
    const received: cri.ContainerEventResponse[] = [];
    for await (const e of client.runtime.getContainerEvents({ signal: controller.signal }))
      received.push(e);
    assert.deepEqual(received, []);
  });
}
