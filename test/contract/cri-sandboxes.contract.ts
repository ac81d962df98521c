/**
 * Contract: pod sandboxes — READY with an IP, metadata kept, filters, one sandbox per
 * name and attempt, stop (NOTREADY, IP released) and remove, both idempotent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CriError, CriNotFoundError, cri } from '../../src/cri/index.ts';
import type { RuntimeRef } from './cri-runtime.contract.ts';
import { PROGRAMS } from './cri-programs.ts';
import {
  containerConfig,
  inSubnet,
  rejectsAsFailed,
  resolvesOrNotFound,
  unknownId,
} from './support.ts';

const READY = cri.PodSandboxState.SANDBOX_READY;
const NOTREADY = cri.PodSandboxState.SANDBOX_NOTREADY;

/** Registers the sandbox tests. */
export function sandboxContract(rt: RuntimeRef): void {
  test('a sandbox is READY with a pod IP and keeps metadata, labels and annotations', async () => {
    const { client, podConfig, podSubnet } = rt();
    const config = podConfig('sandbox');
    const uid = config.metadata?.uid ?? '';
    config.labels['berth.test/pod'] = uid;
    config.annotations['berth.test/note'] = 'kept as given';
    const { podSandboxId } = await client.runtime.runPodSandbox({ config });
    assert.match(podSandboxId, /^[0-9a-f]{64}$/);

    const { status } = await client.runtime.podSandboxStatus({ podSandboxId });
    assert.equal(status?.id, podSandboxId);
    assert.equal(status.state, READY);
    assert.deepEqual(status.metadata, config.metadata);
    assert.deepEqual(status.labels, config.labels);
    assert.deepEqual(status.annotations, config.annotations);
    assert.ok(status.createdAt > 0n);
    const ip = status.network?.ip ?? '';
    assert.ok(inSubnet(ip, podSubnet), `pod IP ${ip} in ${podSubnet}`);

    const list = async (filter: cri.DeepPartial<cri.PodSandboxFilter>): Promise<string[]> =>
      (await client.runtime.listPodSandbox({ filter })).items.map((s) => s.id);
    const mine = { 'berth.test/pod': uid };
    assert.deepEqual(await list({ id: podSandboxId }), [podSandboxId]);
    assert.deepEqual(await list({ id: podSandboxId.slice(0, 12) }), [podSandboxId]);
    assert.deepEqual(await list({ labelSelector: mine }), [podSandboxId]);
    assert.deepEqual(await list({ labelSelector: { ...mine, other: 'x' } }), []);
    assert.deepEqual(await list({ labelSelector: mine, state: { state: READY } }), [podSandboxId]);
    assert.deepEqual(await list({ labelSelector: mine, state: { state: NOTREADY } }), []);
    const [item] = (await client.runtime.listPodSandbox({ filter: { id: podSandboxId } })).items;
    assert.deepEqual(item?.metadata, config.metadata);
    assert.equal(item?.createdAt, status.createdAt);

    // One sandbox per name, namespace, uid and attempt.
    await rejectsAsFailed(client.runtime.runPodSandbox({ config }));

    await client.runtime.stopPodSandbox({ podSandboxId });
    const stopped = await client.runtime.podSandboxStatus({ podSandboxId });
    assert.equal(stopped.status?.state, NOTREADY);
    assert.equal(stopped.status.network?.ip, '');
    assert.deepEqual(await list({ labelSelector: mine, state: { state: NOTREADY } }), [
      podSandboxId,
    ]);
    await client.runtime.stopPodSandbox({ podSandboxId });

    await client.runtime.removePodSandbox({ podSandboxId });
    await assert.rejects(client.runtime.podSandboxStatus({ podSandboxId }), CriNotFoundError);
    assert.deepEqual(await list({ id: podSandboxId }), []);
    await client.runtime.removePodSandbox({ podSandboxId });
  });

  test('a host-network sandbox has no pod IP', async () => {
    const { client, podConfig } = rt();
    const config = podConfig('host-network');
    // The kubelet sets no hostname for host-network pods: they share the node's.
    config.hostname = '';
    const options = config.linux?.securityContext?.namespaceOptions;
    assert.ok(options !== undefined, 'podConfig sets namespace options');
    options.network = cri.NamespaceMode.NODE;
    const { podSandboxId } = await client.runtime.runPodSandbox({ config });
    const { status } = await client.runtime.podSandboxStatus({ podSandboxId });
    assert.equal(status?.state, READY);
    assert.equal(status.network?.ip, '');
    await client.runtime.removePodSandbox({ podSandboxId });
  });

  test('unknown sandboxes: status is NotFound, remove succeeds, stop succeeds or is NotFound', async () => {
    const { client, images } = rt();
    const podSandboxId = unknownId();
    await assert.rejects(client.runtime.podSandboxStatus({ podSandboxId }), CriNotFoundError);
    await client.runtime.removePodSandbox({ podSandboxId });
    await resolvesOrNotFound(client.runtime.stopPodSandbox({ podSandboxId }));
    await assert.rejects(
      client.runtime.createContainer({
        podSandboxId,
        config: containerConfig('orphan', images.busybox, PROGRAMS.sleeper.command),
      }),
      CriNotFoundError,
    );
  });

  test('stopping a sandbox kills its containers, and it takes no new ones', async () => {
    const { client, podConfig, images, credentials } = rt();
    const { imageRef } = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { ...credentials },
    });
    const config = podConfig('stopped');
    const { podSandboxId } = await client.runtime.runPodSandbox({ config });
    const { containerId } = await client.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: containerConfig('main', imageRef, PROGRAMS.sleeper.command),
    });
    await client.runtime.startContainer({ containerId });
    await client.runtime.stopPodSandbox({ podSandboxId });
    const { status } = await client.runtime.containerStatus({ containerId });
    assert.equal(status?.state, cri.ContainerState.CONTAINER_EXITED);
    assert.equal(status.exitCode, 137);
    // 2.x answers Unknown, 1.6 NotFound: berth may rely on a typed CriError only.
    await assert.rejects(
      client.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: containerConfig('late', imageRef, PROGRAMS.sleeper.command),
      }),
      CriError,
    );
    await client.runtime.removePodSandbox({ podSandboxId });
    const { containers } = await client.runtime.listContainers({ filter: { podSandboxId } });
    assert.deepEqual(containers, []);
  });

  test('removing a READY sandbox stops and removes its running containers', async () => {
    const { client, podConfig, images, credentials } = rt();
    const { imageRef } = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { ...credentials },
    });
    const config = podConfig('removed');
    const { podSandboxId } = await client.runtime.runPodSandbox({ config });
    const { containerId } = await client.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: containerConfig('main', imageRef, PROGRAMS.sleeper.command),
    });
    await client.runtime.startContainer({ containerId });
    await client.runtime.removePodSandbox({ podSandboxId });
    const { items } = await client.runtime.listPodSandbox({ filter: { id: podSandboxId } });
    assert.deepEqual(items, []);
    await assert.rejects(client.runtime.containerStatus({ containerId }), CriNotFoundError);
  });
}
