/**
 * Contract: one pod's whole life — authenticated pull, sandbox, a container that logs to
 * its CRI log file, ExecSync, filters, stats, stop and remove.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { CriNotFoundError, cri } from '../../src/cri/index.ts';
import type { RuntimeRef } from './cri-runtime.contract.ts';
import { EXECS, PROGRAMS } from './cri-programs.ts';
import { containerConfig, until } from './support.ts';

const S = cri.ContainerState;

/** Registers the end-to-end lifecycle test. */
export function lifecycleContract(rt: RuntimeRef): void {
  test('pull, sandbox, container, log file, ExecSync, stats, stop and remove', async () => {
    const { client, images, credentials, podConfig, readLog } = rt();
    const config = podConfig('lifecycle');
    // The kubelet creates the pod's log directory; the runtime creates the rest.
    await mkdir(config.logDirectory, { recursive: true });
    const pulled = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { ...credentials },
      sandboxConfig: config,
    });
    const { podSandboxId } = await client.runtime.runPodSandbox({ config });

    const labels = { 'io.kubernetes.container.name': 'main', 'berth.test/role': 'app' };
    const annotations = { 'berth.test/note': 'kept as given' };
    const { containerId } = await client.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: containerConfig('main', pulled.imageRef, PROGRAMS.greeter.command, {
        labels,
        annotations,
      }),
    });
    assert.match(containerId, /^[0-9a-f]{64}$/);
    const created = (await client.runtime.containerStatus({ containerId })).status;
    assert.equal(created?.id, containerId);
    assert.equal(created.state, S.CONTAINER_CREATED);
    assert.deepEqual(created.metadata, { name: 'main', attempt: 0 });
    assert.deepEqual(created.labels, labels);
    assert.deepEqual(created.annotations, annotations);
    assert.equal(created.logPath, join(config.logDirectory, 'main/0.log'));
    assert.ok(created.createdAt > 0n);
    assert.equal(created.startedAt, 0n);
    assert.equal(created.finishedAt, 0n);
    assert.notEqual(created.imageRef, '');
    const [item] = (await client.runtime.listContainers({ filter: { id: containerId } }))
      .containers;
    assert.equal(item?.podSandboxId, podSandboxId);
    assert.equal(item.state, S.CONTAINER_CREATED);
    assert.equal(item.imageRef, pulled.imageRef);
    assert.equal(item.createdAt, created.createdAt);

    await client.runtime.startContainer({ containerId });
    const running = (await client.runtime.containerStatus({ containerId })).status;
    assert.equal(running?.state, S.CONTAINER_RUNNING);
    assert.ok(running.startedAt >= running.createdAt);
    // A unique prefix of the id works as well, as with `crictl`.
    const byPrefix = await client.runtime.containerStatus({
      containerId: containerId.slice(0, 12),
    });
    assert.equal(byPrefix.status?.id, containerId);

    const log = await until('the container log', async () => {
      const text = await readLog(config, 'main/0.log').catch(() => '');
      return text.includes('hello from berth') && text.includes('oops') ? text : undefined;
    });
    // CRI log format: <RFC3339Nano> <stream> <F|P> <text>
    assert.match(log, /^\S+Z stdout F hello from berth$/m);
    assert.match(log, /^\S+Z stderr F oops$/m);

    const exec = await client.runtime.execSync({
      containerId,
      cmd: [...EXECS.arithmetic.cmd],
      timeout: 10n,
    });
    assert.equal(Buffer.from(exec.stdout).toString(), EXECS.arithmetic.stdout);
    assert.equal(Buffer.from(exec.stderr).toString(), EXECS.arithmetic.stderr);
    assert.equal(exec.exitCode, EXECS.arithmetic.exitCode);

    const ids = async (filter: cri.DeepPartial<cri.ContainerFilter>): Promise<string[]> =>
      (await client.runtime.listContainers({ filter: { podSandboxId, ...filter } })).containers.map(
        (c) => c.id,
      );
    assert.deepEqual(await ids({}), [containerId]);
    assert.deepEqual(await ids({ state: { state: S.CONTAINER_RUNNING } }), [containerId]);
    assert.deepEqual(await ids({ state: { state: S.CONTAINER_EXITED } }), []);
    assert.deepEqual(await ids({ labelSelector: { 'berth.test/role': 'app' } }), [containerId]);
    assert.deepEqual(await ids({ labelSelector: { 'berth.test/role': 'db' } }), []);

    const { stats } = await client.runtime.containerStats({ containerId });
    assert.equal(stats?.attributes?.id, containerId);
    assert.deepEqual(stats.attributes.metadata, { name: 'main', attempt: 0 });
    assert.ok((stats.cpu?.timestamp ?? 0n) > 0n);
    assert.ok(stats.memory?.workingSetBytes !== undefined);
    const listed = await client.runtime.listContainerStats({ filter: { podSandboxId } });
    assert.deepEqual(
      listed.stats.map((s) => s.attributes?.id),
      [containerId],
    );

    // busybox sleep dies of SIGTERM, even as PID 1: 128 + 15.
    await client.runtime.stopContainer({ containerId, timeout: 2n });
    const stopped = (await client.runtime.containerStatus({ containerId })).status;
    assert.equal(stopped?.state, S.CONTAINER_EXITED);
    assert.equal(stopped.exitCode, 143);
    assert.equal(stopped.reason, 'Error');
    assert.ok(stopped.finishedAt >= stopped.startedAt);
    assert.equal(stopped.startedAt, running.startedAt);

    await client.runtime.removeContainer({ containerId });
    await assert.rejects(client.runtime.containerStatus({ containerId }), CriNotFoundError);
    await client.runtime.stopPodSandbox({ podSandboxId });
    await client.runtime.removePodSandbox({ podSandboxId });
    const { items } = await client.runtime.listPodSandbox({ filter: { id: podSandboxId } });
    assert.deepEqual(items, []);
  });
}
