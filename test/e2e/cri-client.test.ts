/**
 * The typed CRI client against each real runtime (containerd 2.x and 1.6), each in a
 * full test cluster: authenticated pull from the registry, a sandbox and a container,
 * the container's CRI log file, ExecSync, stop and remove; typed errors for bad
 * credentials, a missing image, a cancelled call and a dead socket.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import {
  CriAbortedError,
  CriNotFoundError,
  CriUnauthenticatedError,
  CriUnavailableError,
  CriUnimplementedError,
  GrpcCriClient,
  cri,
} from '../../src/cri/index.ts';
import { startCluster, type Cluster, type RuntimeKind } from '../harness/cluster.ts';

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(100);
  }
}

function criClientContract(kind: RuntimeKind): void {
  describe(`CRI client against ${kind}`, () => {
    let cluster: Cluster;
    let client: GrpcCriClient;

    before(async () => {
      cluster = await startCluster({ runtime: kind });
      client = new GrpcCriClient(cluster.runtime.socket, { defaultTimeoutMs: 30_000 });
    });

    after(async () => {
      client.close();
      await cluster.stop();
      assert.deepEqual(await cluster.leaks(), []);
    });

    const podConfig = (name: string): cri.PodSandboxConfig => {
      const uid = randomUUID();
      return cri.PodSandboxConfig.fromPartial({
        metadata: { name, uid, namespace: 'berth-test', attempt: 0 },
        hostname: name,
        logDirectory: join(cluster.root, 'pod-logs', uid),
        labels: { 'io.kubernetes.pod.name': name, 'io.kubernetes.pod.uid': uid },
        linux: {
          cgroupParent: `${cluster.state.cgroupRoot}/pod${uid}`,
          securityContext: {
            namespaceOptions: { network: cri.NamespaceMode.POD, pid: cri.NamespaceMode.CONTAINER },
          },
        },
      });
    };

    test('Version names the runtime and CRI v1', async () => {
      const v = await client.runtime.version({ version: '0.1.0' });
      assert.equal(v.runtimeName, 'containerd');
      assert.equal(v.runtimeApiVersion, 'v1');
    });

    test('a pull with wrong credentials is a typed authentication error', async () => {
      await assert.rejects(
        client.image.pullImage({
          image: { image: cluster.images.busybox },
          auth: { username: cluster.registry.credentials.username, password: 'wrong-password' },
        }),
        (err: unknown) => {
          assert.ok(err instanceof CriUnauthenticatedError, String(err));
          assert.equal(err.code, 'BERTH_CRI_UNAUTHENTICATED');
          assert.equal(err.method, 'ImageService/PullImage');
          // The caller's stack survives the gRPC callback.
          assert.match(err.stack ?? '', /cri-client\.test\.ts/);
          return true;
        },
      );
    });

    test('a pull without credentials is refused the same way', async () => {
      await assert.rejects(
        client.image.pullImage({ image: { image: cluster.images.busybox } }),
        CriUnauthenticatedError,
      );
    });

    test('a missing image is a typed not-found error', async () => {
      const missing = `${cluster.registry.host}/berth/does-not-exist:1.0`;
      await assert.rejects(
        client.image.pullImage({
          image: { image: missing },
          auth: { ...cluster.registry.credentials },
        }),
        (err: unknown) => err instanceof CriNotFoundError,
      );
    });

    test('pull, sandbox, container, log file, ExecSync, stop and remove', async () => {
      const config = podConfig('lifecycle');
      await mkdir(config.logDirectory, { recursive: true });
      const pulled = await client.image.pullImage({
        image: { image: cluster.images.busybox },
        auth: { ...cluster.registry.credentials },
        sandboxConfig: config,
      });
      assert.match(pulled.imageRef, /^sha256:[0-9a-f]{64}$/);
      const status = await client.image.imageStatus({ image: { image: cluster.images.busybox } });
      assert.equal(status.image?.id, pulled.imageRef);

      const { podSandboxId } = await client.runtime.runPodSandbox({ config });
      const sandbox = await client.runtime.podSandboxStatus({ podSandboxId });
      assert.equal(sandbox.status?.state, cri.PodSandboxState.SANDBOX_READY);
      const podIp = sandbox.status.network?.ip ?? '';
      assert.ok(
        podIp.startsWith(cluster.runtime.podSubnet.replace(/\.0\/24$/, '.')),
        `pod IP ${podIp} in ${cluster.runtime.podSubnet}`,
      );

      const { containerId } = await client.runtime.createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: {
          metadata: { name: 'main', attempt: 0 },
          image: { image: pulled.imageRef },
          command: ['sh', '-c', 'echo hello from berth; echo oops >&2; exec sleep 3600'],
          logPath: 'main/0.log',
          labels: { 'io.kubernetes.container.name': 'main' },
        },
      });
      await client.runtime.startContainer({ containerId });
      const running = await client.runtime.containerStatus({ containerId });
      assert.equal(running.status?.state, cri.ContainerState.CONTAINER_RUNNING);

      const logFile = join(config.logDirectory, 'main/0.log');
      const log = await until('the container log', async () => {
        const text = await readFile(logFile, 'utf8').catch(() => '');
        return text.includes('hello from berth') && text.includes('oops') ? text : undefined;
      });
      // CRI log format: <RFC3339Nano> <stream> <F|P> <text>
      assert.match(log, /^\S+Z stdout F hello from berth$/m);
      assert.match(log, /^\S+Z stderr F oops$/m);

      const exec = await client.runtime.execSync({
        containerId,
        cmd: ['sh', '-c', 'echo $((6 * 7)); echo to-stderr >&2; exit 3'],
        timeout: 10n,
      });
      assert.equal(Buffer.from(exec.stdout).toString(), '42\n');
      assert.equal(Buffer.from(exec.stderr).toString(), 'to-stderr\n');
      assert.equal(exec.exitCode, 3);

      await client.runtime.stopContainer({ containerId, timeout: 2n });
      const stopped = await client.runtime.containerStatus({ containerId });
      assert.equal(stopped.status?.state, cri.ContainerState.CONTAINER_EXITED);
      await client.runtime.removeContainer({ containerId });
      await assert.rejects(client.runtime.containerStatus({ containerId }), CriNotFoundError);
      await client.runtime.stopPodSandbox({ podSandboxId });
      await client.runtime.removePodSandbox({ podSandboxId });
      const { items } = await client.runtime.listPodSandbox({ filter: { id: podSandboxId } });
      assert.deepEqual(items, []);
    });

    test('an aborted call rejects with a typed abort error', async () => {
      const controller = new AbortController();
      const pending = client.runtime.listContainers({}, { signal: controller.signal });
      controller.abort();
      await assert.rejects(pending, CriAbortedError);
      await assert.rejects(
        client.runtime.version({}, { signal: controller.signal }),
        CriAbortedError,
      );
    });

    if (kind === 'containerd2') {
      test('RuntimeConfig answers with the cgroup driver, and container events stream', async () => {
        const rc = await client.runtime.runtimeConfig({});
        assert.equal(rc.linux?.cgroupDriver, cri.CgroupDriver.CGROUPFS);
        const controller = new AbortController();
        const events: cri.ContainerEventResponse[] = [];
        const reading = (async () => {
          for await (const e of client.runtime.getContainerEvents({ signal: controller.signal }))
            events.push(e);
        })();
        const config = podConfig('events');
        const { podSandboxId } = await client.runtime.runPodSandbox({ config });
        await until('a sandbox event', () =>
          Promise.resolve(
            events.some((e) => e.podSandboxStatus?.id === podSandboxId) ? true : undefined,
          ),
        );
        await client.runtime.stopPodSandbox({ podSandboxId });
        await client.runtime.removePodSandbox({ podSandboxId });
        controller.abort();
        await reading; // ends quietly on abort
      });
    } else {
      test('RuntimeConfig and GetContainerEvents are typed as unimplemented', async () => {
        await assert.rejects(client.runtime.runtimeConfig({}), CriUnimplementedError);
        const iterate = async (): Promise<void> => {
          for await (const e of client.runtime.getContainerEvents())
            assert.fail(`unexpected event ${e.containerId}`);
        };
        await assert.rejects(iterate(), CriUnimplementedError);
      });
    }
  });
}

criClientContract('containerd2');
criClientContract('containerd1');

describe('CRI client without a runtime', () => {
  test('a dead socket is a typed unavailable error within the deadline', async () => {
    const client = new GrpcCriClient('/nonexistent/berth/containerd.sock');
    try {
      const started = Date.now();
      await assert.rejects(client.runtime.version({}, { timeoutMs: 3000 }), (err: unknown) => {
        assert.ok(err instanceof CriUnavailableError, String(err));
        assert.equal(err.code, 'BERTH_CRI_UNAVAILABLE');
        return true;
      });
      assert.ok(Date.now() - started < 3000, 'answered before its deadline');
    } finally {
      client.close();
    }
  });
});
