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
import type { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { podLogsDirectory } from '../container/labels.ts';
import { systemClock } from '../util/clock.ts';
import { HttpError, parseTarget, serveContainerLogs, type HandlerDeps } from './handlers.ts';
import { cacheOf, cachedRunning, runningStatus, runTestContainer, TEST_IMAGE } from './testing.ts';

const IMAGE = TEST_IMAGE;

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
  const named = (): Pod['status'] => runningStatus(containerId, '2026-12-05T00:00:00Z');

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-container-logs-'));
    const dir = join(podLogsDirectory({ namespace: 'ns', name: 'web', uid }, root), 'app');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '0.log'), '2026-12-05T00:00:00.000000000Z stdout F hello\n');
    containerId = await runTestContainer(
      client,
      uid,
      podLogsDirectory({ namespace: 'ns', name: 'web', uid }, root),
    );
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
      runtimeCache: cacheOf(uid, cached),
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

  const running = (id: string): cri.Container => cachedRunning(uid, id);

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
