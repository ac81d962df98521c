/**
 * Where the fake's two flavours answer differently, each answers as its containerd did
 * in the test cluster (the contract only asserts what berth may rely on for both).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CriError, CriNotFoundError, CriUnimplementedError, cri } from '../index.ts';
import { FakeCriClient, type FakeRuntimeFlavor } from './index.ts';

const IMAGE = 'registry.test/app:1';

async function setUp(flavor: FakeRuntimeFlavor): Promise<{
  fake: FakeCriClient;
  podSandboxId: string;
  containerId: string;
}> {
  const fake = new FakeCriClient({ flavor });
  fake.addImage(IMAGE, { preloaded: true });
  const config = { metadata: { name: 'p', uid: 'u1', namespace: 'ns' } };
  const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
  const { containerId } = await fake.runtime.createContainer({
    podSandboxId,
    sandboxConfig: config,
    config: { metadata: { name: 'app' }, image: { image: IMAGE } },
  });
  return { fake, podSandboxId, containerId };
}

function grpcCodeOf(err: unknown): GrpcStatus | undefined {
  return err instanceof CriError ? err.grpcCode : undefined;
}

describe('fake CRI runtime flavours', () => {
  test('stopping what does not exist: success on 2.x, NotFound on 1.6', async () => {
    const v2 = new FakeCriClient({ flavor: 'containerd2' });
    await v2.runtime.stopContainer({ containerId: 'nope' });
    await v2.runtime.stopPodSandbox({ podSandboxId: 'nope' });
    const v1 = new FakeCriClient({ flavor: 'containerd1' });
    await assert.rejects(v1.runtime.stopContainer({ containerId: 'nope' }), CriNotFoundError);
    await assert.rejects(v1.runtime.stopPodSandbox({ podSandboxId: 'nope' }), CriNotFoundError);
  });

  test('a taken name and a stopped sandbox are refused with each version’s code', async () => {
    const codes = async (flavor: FakeRuntimeFlavor): Promise<unknown[]> => {
      const { fake, podSandboxId } = await setUp(flavor);
      const config = { metadata: { name: 'app' }, image: { image: IMAGE } };
      const taken = await fake.runtime.createContainer({ podSandboxId, config }).catch(grpcCodeOf);
      await fake.runtime.stopPodSandbox({ podSandboxId });
      const late = { metadata: { name: 'late' }, image: { image: IMAGE } };
      const stopped = await fake.runtime
        .createContainer({ podSandboxId, config: late })
        .catch(grpcCodeOf);
      return [taken, stopped];
    };
    assert.deepEqual(await codes('containerd2'), [
      GrpcStatus.FAILED_PRECONDITION,
      GrpcStatus.UNKNOWN,
    ]);
    assert.deepEqual(await codes('containerd1'), [GrpcStatus.UNKNOWN, GrpcStatus.NOT_FOUND]);
  });

  test('ContainerStatus: imageId, user and stop signal on 2.x only', async () => {
    const v2 = await setUp('containerd2');
    const s2 = (await v2.fake.runtime.containerStatus({ containerId: v2.containerId })).status;
    assert.ok(s2 !== undefined);
    assert.match(s2.imageId, /^sha256:/);
    assert.equal(s2.stopSignal, cri.Signal.SIGNAL_SIGTERM);
    assert.equal(s2.user?.linux?.uid, 0n);
    const v1 = await setUp('containerd1');
    const s1 = (await v1.fake.runtime.containerStatus({ containerId: v1.containerId })).status;
    assert.ok(s1 !== undefined);
    assert.equal(s1.imageId, '');
    assert.equal(s1.stopSignal, cri.Signal.SIGNAL_RUNTIME_DEFAULT);
    assert.equal(s1.user, undefined);
  });

  test('the sandbox image is pinned on 2.x only', async () => {
    const pinned = async (flavor: FakeRuntimeFlavor): Promise<boolean | undefined> => {
      const fake = new FakeCriClient({ flavor, sandboxImage: 'registry.test/pause:1' });
      const { image } = await fake.image.imageStatus({ image: { image: 'registry.test/pause:1' } });
      return image?.pinned;
    };
    assert.equal(await pinned('containerd2'), true);
    assert.equal(await pinned('containerd1'), false);
  });

  test('1.6 lacks the metrics and checkpoint RPCs; 2.x has them', async () => {
    const v1 = await setUp('containerd1');
    await assert.rejects(v1.fake.runtime.listMetricDescriptors({}), CriUnimplementedError);
    await assert.rejects(v1.fake.runtime.listPodSandboxMetrics({}), CriUnimplementedError);
    await assert.rejects(
      v1.fake.runtime.checkpointContainer({ containerId: v1.containerId }),
      CriUnimplementedError,
    );
    const v2 = await setUp('containerd2');
    assert.ok((await v2.fake.runtime.listMetricDescriptors({})).descriptors.length > 0);
    const { podMetrics } = await v2.fake.runtime.listPodSandboxMetrics({});
    assert.deepEqual(
      podMetrics.map((m) => m.podSandboxId),
      [v2.podSandboxId],
    );
    // containerd 2.x has the RPC but, without criu, cannot checkpoint.
    await assert.rejects(
      v2.fake.runtime.checkpointContainer({ containerId: v2.containerId }),
      (err: unknown) => grpcCodeOf(err) === GrpcStatus.UNKNOWN,
    );
  });

  test('Status lists runtime handlers and features on 2.x only', async () => {
    const v2 = await new FakeCriClient({ flavor: 'containerd2' }).runtime.status({});
    assert.deepEqual(
      v2.runtimeHandlers.map((h) => h.name),
      ['', 'runc'],
    );
    assert.ok(v2.features !== undefined);
    const v1 = await new FakeCriClient({ flavor: 'containerd1' }).runtime.status({});
    assert.deepEqual(v1.runtimeHandlers, []);
    assert.equal(v1.features, undefined);
  });

  test('both ignore ListImages’ filter, as containerd does', async () => {
    const fake = new FakeCriClient({ sandboxImage: 'registry.test/pause:1' });
    fake.addImage(IMAGE, { preloaded: true });
    const { images } = await fake.image.listImages({ filter: { image: { image: IMAGE } } });
    assert.equal(images.length, 2);
  });
});
