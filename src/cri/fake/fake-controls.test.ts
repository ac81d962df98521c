/**
 * The fake runtime's test controls: injected time, scripted starts and execs, exits,
 * injected failures, held calls, close, logs, usage, conditions and event streams.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  CriAbortedError,
  CriDeadlineExceededError,
  CriError,
  CriUnavailableError,
  cri,
} from '../index.ts';
import { FakeClock } from '../../util/clock.ts';
import { FakeCriClient, rfc3339Nano } from './index.ts';

const IMAGE = 'registry.test/app:1';
const START = Date.UTC(2026, 0, 1);
const ns = (ms: number): bigint => BigInt(ms) * 1_000_000n;

interface Pod {
  readonly fake: FakeCriClient;
  readonly podSandboxId: string;
  create(name?: string, attempt?: number): Promise<string>;
  run(name?: string): Promise<string>;
}

async function pod(fake: FakeCriClient, logDirectory = '/var/log/pods/ns_p_u1'): Promise<Pod> {
  fake.addImage(IMAGE, { preloaded: true });
  const config = cri.PodSandboxConfig.fromPartial({
    metadata: { name: 'p', uid: 'u1', namespace: 'ns' },
    logDirectory,
  });
  const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
  const create = async (name = 'app', attempt = 0): Promise<string> =>
    (
      await fake.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: { metadata: { name, attempt }, image: { image: IMAGE }, logPath: `${name}.log` },
      })
    ).containerId;
  const run = async (name = 'app'): Promise<string> => {
    const containerId = await create(name);
    await fake.runtime.startContainer({ containerId });
    return containerId;
  };
  return { fake, podSandboxId, create, run };
}

async function status(fake: FakeCriClient, containerId: string): Promise<cri.ContainerStatus> {
  return (await fake.runtime.containerStatus({ containerId })).status ?? assert.fail('no status');
}

describe('fake CRI runtime: time and scripted containers', () => {
  test('timestamps come from the injected clock, in ns, strictly increasing', async () => {
    const clock = new FakeClock(START);
    const p = await pod(new FakeCriClient({ clock }));
    const sandbox = await p.fake.runtime.podSandboxStatus({ podSandboxId: p.podSandboxId });
    assert.equal(sandbox.status?.createdAt, ns(START));
    const containerId = await p.create();
    const created = await status(p.fake, containerId);
    assert.ok(created.createdAt > ns(START) && created.createdAt < ns(START + 1));
    await clock.advance(5000);
    await p.fake.runtime.startContainer({ containerId });
    assert.equal((await status(p.fake, containerId)).startedAt, ns(START + 5000));
  });

  test('onStart makes a container crash right after starting (CrashLoopBackOff)', async () => {
    const fake = new FakeCriClient();
    fake.onStart((c) =>
      c.name === 'crasher'
        ? { exitCode: 1, output: [{ stream: 'stderr', text: 'boom' }] }
        : undefined,
    );
    const p = await pod(fake);
    const events: cri.ContainerEventResponse[] = [];
    const controller = new AbortController();
    const reading = (async () => {
      for await (const e of fake.runtime.getContainerEvents({ signal: controller.signal }))
        events.push(e);
    })();
    const first = await p.run('crasher');
    const s = await status(fake, first);
    assert.equal(s.state, cri.ContainerState.CONTAINER_EXITED);
    assert.equal(s.exitCode, 1);
    assert.equal(s.reason, 'Error');
    assert.match(fake.logText(first), /^\S+Z stderr F boom\n$/);
    // The kubelet's next attempt is a new container with the next attempt number.
    const second = await p.create('crasher', 1);
    assert.notEqual(second, first);
    controller.abort();
    await reading;
    const types = events.filter((e) => e.containerId === first).map((e) => e.containerEventType);
    const E = cri.ContainerEventType;
    assert.deepEqual(types, [
      E.CONTAINER_CREATED_EVENT,
      E.CONTAINER_STARTED_EVENT,
      E.CONTAINER_STOPPED_EVENT,
    ]);
  });

  test('a throwing onStart handler is a start error', async () => {
    const fake = new FakeCriClient();
    fake.onStart(() => {
      throw new Error('exec format error');
    });
    const p = await pod(fake);
    const containerId = await p.create();
    await assert.rejects(fake.runtime.startContainer({ containerId }), /exec format error/);
    const s = await status(fake, containerId);
    assert.equal(s.reason, 'StartError');
    assert.equal(s.exitCode, 128);
  });

  test('exitContainer ends a running container with the given code and reason', async () => {
    const p = await pod(new FakeCriClient());
    const containerId = await p.run();
    p.fake.exitContainer(containerId, 137, { reason: 'OOMKilled' });
    const s = await status(p.fake, containerId);
    assert.equal(s.state, cri.ContainerState.CONTAINER_EXITED);
    assert.equal(s.exitCode, 137);
    assert.equal(s.reason, 'OOMKilled');
    assert.throws(() => {
      p.fake.exitContainer(containerId, 0);
    }, /Cannot exit container .* current state is CONTAINER_EXITED/);
  });

  test('ExecSync: default success, scripted output, errors and timeouts', async () => {
    const p = await pod(new FakeCriClient());
    const containerId = await p.run();
    const exec = (cmd: string[], timeout = 0n) =>
      p.fake.runtime.execSync({ containerId, cmd, timeout });
    assert.equal((await exec(['true'])).exitCode, 0);
    p.fake.onExec((_c, cmd) => {
      if (cmd[0] === 'fail') throw new Error('no such binary');
      if (cmd[0] === 'typed')
        throw new CriAbortedError('given', {
          method: 'x',
          grpcCode: GrpcStatus.CANCELLED,
          details: '',
        });
      return { stdout: 'ok\n', exitCode: 2, durationMs: cmd[0] === 'slow' ? 3000 : 0 };
    });
    const r = await exec(['probe']);
    assert.equal(r.stdout.toString(), 'ok\n');
    assert.equal(r.exitCode, 2);
    await assert.rejects(exec(['fail']), (err: unknown) => {
      assert.ok(err instanceof CriError && err.code === 'BERTH_CRI_FAILED', String(err));
      assert.match(err.message, /no such binary/);
      return true;
    });
    await assert.rejects(exec(['typed']), CriAbortedError);
    await assert.rejects(exec(['slow'], 2n), CriDeadlineExceededError);
    assert.equal((await exec(['slow'], 4n)).exitCode, 2);
  });
});

describe('fake CRI runtime: injected failures, held calls and close', () => {
  test('failNext fails the next call of a method only, with the typed error', async () => {
    const fake = new FakeCriClient();
    const given = new Error('exactly this');
    fake.failNext('RuntimeService/Version', { grpcCode: GrpcStatus.UNAVAILABLE });
    fake.failNext('RuntimeService/Version', given);
    await assert.rejects(fake.runtime.version({}), (err: unknown) => {
      assert.ok(err instanceof CriUnavailableError, String(err));
      assert.equal(err.method, 'RuntimeService/Version');
      assert.match(err.stack ?? '', /fake-controls\.test\.ts/);
      return true;
    });
    await assert.rejects(fake.runtime.version({}), (err: unknown) => err === given);
    assert.equal((await fake.runtime.version({})).runtimeName, 'containerd');
    await fake.runtime.status({}); // other methods were never affected
  });

  test('a held call is settled by the caller abort; the runtime still applies it', async () => {
    const p = await pod(new FakeCriClient());
    const hold = p.fake.holdNext('RuntimeService/CreateContainer');
    const controller = new AbortController();
    const creating = p.fake.runtime.createContainer(
      {
        podSandboxId: p.podSandboxId,
        config: { metadata: { name: 'slow' }, image: { image: IMAGE } },
      },
      { signal: controller.signal },
    );
    await hold.arrived;
    controller.abort();
    await assert.rejects(creating, CriAbortedError);
    hold.release();
    await new Promise((resolve) => setImmediate(resolve));
    const { containers } = await p.fake.runtime.listContainers({});
    assert.deepEqual(
      containers.map((c) => c.metadata?.name),
      ['slow'],
    );
  });

  test('a held call fails with DeadlineExceeded when its deadline passes on the clock', async () => {
    const clock = new FakeClock(START);
    const fake = new FakeCriClient({ clock });
    const hold = fake.holdNext('RuntimeService/ListContainers');
    const listing = fake.runtime.listContainers({}, { timeoutMs: 1000 });
    const rejected = assert.rejects(listing, CriDeadlineExceededError);
    await hold.arrived;
    await clock.advance(999);
    assert.equal(clock.pending, 1);
    await clock.advance(1);
    await rejected;
    hold.release();
    assert.equal(clock.pending, 0);
  });

  test('close fails held calls, later calls and open event streams as unavailable', async () => {
    const fake = new FakeCriClient();
    const hold = fake.holdNext('RuntimeService/Version');
    const pending = fake.runtime.version({});
    const stream = fake.runtime.getContainerEvents()[Symbol.asyncIterator]();
    const next = stream.next();
    await hold.arrived;
    assert.equal(fake.eventStreams, 1);
    fake.close();
    fake.close(); // idempotent
    assert.equal(fake.closed, true);
    await assert.rejects(pending, CriUnavailableError);
    await assert.rejects(next, CriUnavailableError);
    await assert.rejects(fake.runtime.version({}), CriUnavailableError);
    await assert.rejects(fake.image.listImages({}), CriUnavailableError);
    {
      using disposed = new FakeCriClient();
      assert.equal(disposed.closed, false);
    }
  });

  test('breakEventStreams ends open streams with an error; new ones work', async () => {
    const fake = new FakeCriClient();
    const first = fake.runtime.getContainerEvents()[Symbol.asyncIterator]();
    const next = first.next();
    await Promise.resolve();
    fake.breakEventStreams();
    await assert.rejects(next, CriUnavailableError);
    assert.equal(fake.eventStreams, 0);
    const controller = new AbortController();
    const second = fake.runtime.getContainerEvents({ signal: controller.signal });
    const iterator = second[Symbol.asyncIterator]();
    const event = iterator.next();
    fake.addImage(IMAGE, { preloaded: true });
    await fake.runtime.runPodSandbox({ config: { metadata: { name: 'p' } } });
    const created = await event;
    assert.ok(created.done !== true);
    assert.equal(created.value.containerEventType, cri.ContainerEventType.CONTAINER_CREATED_EVENT);
    controller.abort();
    assert.equal((await iterator.next()).done, true);
  });
});

describe('fake CRI runtime: recorded calls, copies, logs, usage and conditions', () => {
  test('calls are recorded with proto3 defaults, and answers are copies', async () => {
    const p = await pod(new FakeCriClient());
    const containerId = await p.run();
    p.fake.clearCalls();
    await p.fake.runtime.stopContainer({ containerId });
    assert.deepEqual(p.fake.callsTo('RuntimeService/StopContainer'), [
      { containerId, timeout: 0n },
    ]);
    assert.deepEqual(
      p.fake.calls.map((c) => c.method),
      ['RuntimeService/StopContainer'],
    );
    const first = await status(p.fake, containerId);
    first.labels['changed'] = 'by the caller';
    assert.deepEqual((await status(p.fake, containerId)).labels, {});
  });

  test('logs go to the file when the log directory exists, and always to memory', async () => {
    const root = await mkdtemp(join(tmpdir(), 'berth-fake-log-'));
    try {
      const clock = new FakeClock(START);
      const onDisk = await pod(new FakeCriClient({ clock }), root);
      const containerId = await onDisk.run();
      await onDisk.fake.writeLog(containerId, 'stdout', 'one\ntwo\n');
      const text = await readFile(join(root, 'app.log'), 'utf8');
      // One record per line, both stamped with the injected clock's time.
      assert.match(text, /^(2026-01-01T00:00:00\.\d{9}Z) stdout F one\n\1 stdout F two\n$/);
      assert.equal(onDisk.fake.logText(containerId), text);
      assert.equal(rfc3339Nano(ns(START) + 5n), '2026-01-01T00:00:00.000000005Z');

      // A made-up directory (the usual unit test) gets nothing written.
      const inMemory = await pod(new FakeCriClient(), join(root, 'missing'));
      const other = await inMemory.run();
      await inMemory.fake.writeLog(other, 'stderr', 'only in memory');
      assert.match(inMemory.fake.logText(other), /stderr F only in memory\n$/);
      assert.equal((await status(inMemory.fake, other)).logPath, join(root, 'missing', 'app.log'));
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  test('setUsage feeds the stats, setCondition the Status', async () => {
    const p = await pod(new FakeCriClient());
    const containerId = await p.run();
    p.fake.setUsage(containerId, { cpuUsageCoreNanoSeconds: 42n, memoryWorkingSetBytes: 1024n });
    const { stats } = await p.fake.runtime.containerStats({ containerId });
    assert.equal(stats?.cpu?.usageCoreNanoSeconds?.value, 42n);
    assert.equal(stats.memory?.workingSetBytes?.value, 1024n);
    const sandbox = await p.fake.runtime.podSandboxStats({ podSandboxId: p.podSandboxId });
    assert.equal(sandbox.stats?.linux?.memory?.workingSetBytes?.value, 1024n);
    p.fake.setCondition('NetworkReady', false, { reason: 'NetworkPluginNotReady' });
    const { status: runtime } = await p.fake.runtime.status({});
    assert.deepEqual(
      runtime?.conditions.map((c) => [c.type, c.status, c.reason]),
      [
        ['RuntimeReady', true, ''],
        ['NetworkReady', false, 'NetworkPluginNotReady'],
      ],
    );
  });

  test('killSandbox makes the sandbox NOTREADY and leaves its containers running', async () => {
    const p = await pod(new FakeCriClient());
    const containerId = await p.run();
    p.fake.killSandbox(p.podSandboxId);
    const { status: sb } = await p.fake.runtime.podSandboxStatus({ podSandboxId: p.podSandboxId });
    assert.equal(sb?.state, cri.PodSandboxState.SANDBOX_NOTREADY);
    assert.equal((await status(p.fake, containerId)).state, cri.ContainerState.CONTAINER_RUNNING);
  });

  test('pod IPs come in order from the subnet and run out like a real IPAM', async () => {
    const fake = new FakeCriClient({ podSubnet: '10.9.8.0/29' });
    const ips: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { podSandboxId } = await fake.runtime.runPodSandbox({
        config: { metadata: { name: `p${i}` } },
      });
      const { status: sb } = await fake.runtime.podSandboxStatus({ podSandboxId });
      ips.push(sb?.network?.ip ?? '');
    }
    assert.deepEqual(ips, ['10.9.8.2', '10.9.8.3', '10.9.8.4', '10.9.8.5', '10.9.8.6']);
    await assert.rejects(
      fake.runtime.runPodSandbox({ config: { metadata: { name: 'one-too-many' } } }),
      /no IP addresses left/,
    );
  });

  test('image references are normalised like containerd, ids found by prefix', async () => {
    const fake = new FakeCriClient();
    const { id } = fake.addImage('busybox');
    assert.equal((await fake.image.pullImage({ image: { image: 'busybox' } })).imageRef, id);
    const byName = await fake.image.imageStatus({ image: { image: 'docker.io/library/busybox' } });
    assert.deepEqual(byName.image?.repoTags, ['docker.io/library/busybox:latest']);
    const byPrefix = await fake.image.imageStatus({ image: { image: id.slice(7, 19) } });
    assert.equal(byPrefix.image?.id, id);
  });
});
