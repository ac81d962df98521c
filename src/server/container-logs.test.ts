/**
 * serveContainerLogs picks the container instance the pod status names from the PLEG's
 * last relist when it has it, and asks the runtime otherwise; either way the same log.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { podLogsDirectory } from '../kuberuntime/labels.ts';
import type { RuntimePodSnapshot } from '../pleg/types.ts';
import { systemClock } from '../util/clock.ts';
import { HttpError, parseTarget, serveContainerLogs, type HandlerDeps } from './handlers.ts';

const IMAGE = '127.0.0.1:5000/berth/busybox:1.35.0';

describe('serveContainerLogs and the PLEG cache', () => {
  const client = new FakeCriClient();
  const uid = randomUUID();
  let root = '';
  let containerId = '';
  let server: Server | undefined;
  let deps: HandlerDeps;

  const pod = (status: Pod['status']): Pod => ({
    metadata: { name: 'web', namespace: 'ns', uid },
    spec: { containers: [{ name: 'app', image: IMAGE }] },
    ...(status !== undefined && { status }),
  });
  const named = (): Pod['status'] => ({
    containerStatuses: [
      {
        name: 'app',
        image: IMAGE,
        imageID: '',
        ready: true,
        restartCount: 0,
        containerID: `containerd://${containerId}`,
        state: { running: { startedAt: '2026-12-05T00:00:00Z' } },
      },
    ],
  });

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-container-logs-'));
    const dir = join(podLogsDirectory({ namespace: 'ns', name: 'web', uid }, root), 'app');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '0.log'), '2026-12-05T00:00:00.000000000Z stdout F hello\n');
    client.addImage(IMAGE);
    await client.image.pullImage({ image: { image: IMAGE } }, {});
    const config = cri.PodSandboxConfig.fromPartial({
      metadata: { name: 'web', uid, namespace: 'ns', attempt: 0 },
      labels: { 'io.kubernetes.pod.uid': uid },
      logDirectory: podLogsDirectory({ namespace: 'ns', name: 'web', uid }, root),
    });
    const { podSandboxId } = await client.runtime.runPodSandbox({ config, runtimeHandler: '' }, {});
    const created = await client.runtime.createContainer(
      {
        podSandboxId,
        sandboxConfig: config,
        config: cri.ContainerConfig.fromPartial({
          metadata: { name: 'app', attempt: 0 },
          image: { image: IMAGE },
          command: ['sleep', '3600'],
          labels: { 'io.kubernetes.pod.uid': uid, 'io.kubernetes.container.name': 'app' },
          logPath: 'app/0.log',
        }),
      },
      {},
    );
    containerId = created.containerId;
    await client.runtime.startContainer({ containerId }, {});
  });
  after(async () => {
    server?.close();
    client.close();
    await rm(root, { recursive: true, force: true });
  });

  /** Serves one logs request with `status` on the pod and `cached` in the PLEG cache. */
  async function logs(status: Pod['status'], cached: readonly cri.Container[]): Promise<string> {
    deps = {
      cri: client,
      clock: systemClock,
      nodeName: 'node',
      podLogsDir: root,
      pods: () => new Map([[uid, pod(status)]]),
      runtimeCache: {
        get: (u): RuntimePodSnapshot => ({
          uid: u,
          sandboxes: [],
          containers: u === uid ? cached : [],
        }),
        uids: () => [uid],
        lastRelistAt: 1,
      },
    };
    server ??= await new Promise<Server>((resolve) => {
      const s = createServer((req, res) => {
        serveContainerLogs(deps, parseTarget(req.url ?? '/'), res, AbortSignal.timeout(5000)).catch(
          (err: unknown) => {
            res.writeHead(err instanceof HttpError ? err.status : 500).end(String(err));
          },
        );
      });
      s.listen(0, '127.0.0.1', () => {
        resolve(s);
      });
    });
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/containerLogs/ns/web/app`);
    return `${res.status} ${await res.text()}`;
  }

  const running = (id: string): cri.Container =>
    cri.Container.fromPartial({
      id,
      state: cri.ContainerState.CONTAINER_RUNNING,
      labels: { 'io.kubernetes.pod.uid': uid, 'io.kubernetes.container.name': 'app' },
    });

  it('the instance the status names, found in the cache: no listing', async () => {
    client.clearCalls();
    assert.equal(await logs(named(), [running(containerId)]), '200 hello\n');
    assert.equal(client.callsTo('RuntimeService/ListContainers').length, 0);
  });

  it('the named instance not in the cache yet: the runtime is listed', async () => {
    client.clearCalls();
    assert.equal(await logs(named(), [running('older')]), '200 hello\n');
    assert.equal(client.callsTo('RuntimeService/ListContainers').length, 1);
  });

  it('no status for the container yet: the runtime decides', async () => {
    client.clearCalls();
    assert.equal(await logs(undefined, [running(containerId)]), '200 hello\n');
    assert.equal(client.callsTo('RuntimeService/ListContainers').length, 1);
  });
});
