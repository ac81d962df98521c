/**
 * Contract: how containers end (their own exit codes, a failed start, a graceful or a
 * forced stop) and which operations each state refuses, with which typed errors.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { test } from 'node:test';
import {
  CriDeadlineExceededError,
  CriNotFoundError,
  cri,
  type CriClient,
} from '../../src/cri/index.ts';
import type { RuntimeRef } from './cri-runtime.contract.ts';
import { EXECS, PROGRAMS, type ContractProgram } from './cri-programs.ts';
import {
  containerConfig,
  rejectsAsFailed,
  resolvesOrNotFound,
  unknownId,
  until,
} from './support.ts';

const S = cri.ContainerState;

interface Pod {
  readonly config: cri.PodSandboxConfig;
  readonly podSandboxId: string;
  readonly imageRef: string;
  create(name: string, program: ContractProgram): Promise<string>;
  exited(containerId: string): Promise<cri.ContainerStatus>;
  remove(): Promise<void>;
}

/** A sandbox with busybox pulled, and helpers to run the contract's programs in it. */
async function startPod(rt: RuntimeRef, name: string): Promise<Pod> {
  const { client, images, credentials, podConfig } = rt();
  const { imageRef } = await client.image.pullImage({
    image: { image: images.busybox },
    auth: { ...credentials },
  });
  const config = podConfig(name);
  await mkdir(config.logDirectory, { recursive: true });
  const { podSandboxId } = await client.runtime.runPodSandbox({ config });
  return {
    config,
    podSandboxId,
    imageRef,
    create: async (container, program) =>
      (
        await client.runtime.createContainer({
          podSandboxId,
          sandboxConfig: config,
          config: containerConfig(container, imageRef, program.command),
        })
      ).containerId,
    exited: (containerId) => exitedStatus(client, containerId),
    remove: () => client.runtime.removePodSandbox({ podSandboxId }).then(() => undefined),
  };
}

/** Waits for the container to be EXITED (a real runtime notices an exit a moment later). */
function exitedStatus(client: CriClient, containerId: string): Promise<cri.ContainerStatus> {
  return until(`container ${containerId} to exit`, async () => {
    const { status } = await client.runtime.containerStatus({ containerId });
    return status?.state === S.CONTAINER_EXITED ? status : undefined;
  });
}

/** Registers the container state tests. */
export function containerContract(rt: RuntimeRef): void {
  test('containers that exit on their own report exit code and reason', async () => {
    const { client, readLog } = rt();
    const pod = await startPod(rt, 'exits');
    const failing = await pod.create('failing', PROGRAMS.failing);
    const succeeding = await pod.create('succeeding', PROGRAMS.succeeding);
    await client.runtime.startContainer({ containerId: failing });
    await client.runtime.startContainer({ containerId: succeeding });

    const failed = await pod.exited(failing);
    assert.equal(failed.exitCode, 3);
    assert.equal(failed.reason, 'Error');
    assert.ok(failed.finishedAt > 0n);
    const log = await until('the log of the failing container', async () => {
      const text = await readLog(pod.config, 'failing/0.log').catch(() => '');
      return text.includes('giving up') ? text : undefined;
    });
    assert.match(log, /^\S+Z stdout F giving up$/m);
    const done = await pod.exited(succeeding);
    assert.equal(done.exitCode, 0);
    assert.equal(done.reason, 'Completed');

    // An exited container cannot start again or run commands; stopping it is a no-op.
    await rejectsAsFailed(client.runtime.startContainer({ containerId: failing }));
    await rejectsAsFailed(client.runtime.execSync({ containerId: failing, cmd: ['true'] }));
    await client.runtime.stopContainer({ containerId: failing, timeout: 0n });
    assert.equal((await pod.exited(failing)).exitCode, 3);
    await pod.remove();
  });

  test('output without a final newline is logged as a partial (P) record', async () => {
    const { client, readLog } = rt();
    const pod = await startPod(rt, 'partial');
    const id = await pod.create('unterminated', PROGRAMS.unterminated);
    await client.runtime.startContainer({ containerId: id });
    await pod.exited(id);
    const log = await until('the log of the unterminated container', async () => {
      const text = await readLog(pod.config, 'unterminated/0.log').catch(() => '');
      return text.includes('no newline') ? text : undefined;
    });
    // kubectl logs and the termination-message fallback must show this record.
    assert.match(log, /^\S+Z stdout P no newline$/m);
    await pod.remove();
  });

  test('a container whose entrypoint is missing fails to start and is EXITED', async () => {
    const { client } = rt();
    const pod = await startPod(rt, 'start-error');
    const containerId = await pod.create('broken', PROGRAMS.missingEntrypoint);
    await rejectsAsFailed(client.runtime.startContainer({ containerId }));
    const { status } = await client.runtime.containerStatus({ containerId });
    assert.equal(status?.state, S.CONTAINER_EXITED);
    assert.equal(status.exitCode, 128);
    assert.equal(status.reason, 'StartError');
    assert.match(status.message, /does-not-exist/);
    assert.equal(status.startedAt, 0n);
    assert.ok(status.finishedAt > 0n);
    await pod.remove();
  });

  test('a stop with a grace period lets SIGTERM be handled; without one it kills', async () => {
    const { client, readLog } = rt();
    const pod = await startPod(rt, 'graceful');
    const stop = async (name: string, timeout: bigint): Promise<cri.ContainerStatus> => {
      const containerId = await pod.create(name, PROGRAMS.graceful);
      await client.runtime.startContainer({ containerId });
      await until('the trap to be installed', async () =>
        (await readLog(pod.config, `${name}/0.log`).catch(() => '')).includes('ready')
          ? true
          : undefined,
      );
      await client.runtime.stopContainer({ containerId, timeout });
      return (await client.runtime.containerStatus({ containerId })).status ?? assert.fail();
    };
    const graceful = await stop('graceful', 10n);
    assert.equal(graceful.state, S.CONTAINER_EXITED);
    assert.equal(graceful.exitCode, 0);
    assert.equal(graceful.reason, 'Completed');
    const killed = await stop('killed', 0n);
    assert.equal(killed.state, S.CONTAINER_EXITED);
    assert.equal(killed.exitCode, 137);
    assert.equal(killed.reason, 'Error');
    await pod.remove();
  });

  test('operations a state does not allow are refused with typed errors', async () => {
    const { client, missingImage } = rt();
    const pod = await startPod(rt, 'states');
    const containerId = await pod.create('main', PROGRAMS.sleeper);
    // CREATED: no exec; stopping leaves it CREATED.
    await rejectsAsFailed(client.runtime.execSync({ containerId, cmd: ['true'] }));
    await client.runtime.stopContainer({ containerId, timeout: 0n });
    const created = await client.runtime.containerStatus({ containerId });
    assert.equal(created.status?.state, S.CONTAINER_CREATED);
    // One container per name and attempt in a sandbox.
    await rejectsAsFailed(pod.create('main', PROGRAMS.sleeper));
    await assert.rejects(
      client.runtime.createContainer({
        podSandboxId: pod.podSandboxId,
        sandboxConfig: pod.config,
        config: containerConfig('no-image', missingImage, PROGRAMS.sleeper.command),
      }),
      CriNotFoundError,
    );
    await client.runtime.startContainer({ containerId });
    await rejectsAsFailed(client.runtime.startContainer({ containerId }));
    await assert.rejects(
      client.runtime.execSync({ containerId, cmd: [...EXECS.slow.cmd], timeout: 1n }),
      CriDeadlineExceededError,
    );
    await rejectsAsFailed(
      client.runtime.containerStats({ containerId: await pod.create('idle', PROGRAMS.sleeper) }),
    );
    // Removing a running container kills it first.
    await client.runtime.removeContainer({ containerId });
    await assert.rejects(client.runtime.containerStatus({ containerId }), CriNotFoundError);
    await pod.remove();
  });

  test('unknown containers: status, start and exec are NotFound; remove succeeds', async () => {
    const { client } = rt();
    const containerId = unknownId();
    await assert.rejects(client.runtime.containerStatus({ containerId }), CriNotFoundError);
    await assert.rejects(client.runtime.startContainer({ containerId }), CriNotFoundError);
    await assert.rejects(
      client.runtime.execSync({ containerId, cmd: ['true'], timeout: 1n }),
      CriNotFoundError,
    );
    await assert.rejects(client.runtime.containerStats({ containerId }), CriNotFoundError);
    await client.runtime.removeContainer({ containerId });
    await resolvesOrNotFound(client.runtime.stopContainer({ containerId, timeout: 0n }));
  });
}
