/** Set-up shared by the benchmarks: the namespace pods go to, and an empty runtime. */
import { setTimeout as sleep } from 'node:timers/promises';
import { GrpcCriClient } from '../src/cri/index.ts';
import type { Cluster } from '../test/harness/cluster.ts';
import { ApiError, type KubeApi } from './kube-api.ts';

/** Creates `namespace` and waits for its default service account (pods need it). */
export async function prepareNamespace(api: KubeApi, namespace: string): Promise<void> {
  await api.send(
    'POST',
    '/api/v1/namespaces',
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    [409],
  );
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = await api
      .send('GET', `/api/v1/namespaces/${namespace}/serviceaccounts/default`)
      .then(
        () => true,
        (err: unknown) => {
          if (err instanceof ApiError && err.status === 404) return false;
          throw err;
        },
      );
    if (found) return;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${namespace}/default`);
    await sleep(200);
  }
}

/** Removes whatever sandboxes the runtime still holds; returns how many there were. */
export async function clearRuntime(cluster: Cluster): Promise<number> {
  const client = new GrpcCriClient(cluster.runtime.socket, { defaultTimeoutMs: 60_000 });
  try {
    const { items } = await client.runtime.listPodSandbox({});
    for (const s of items) {
      await client.runtime.stopPodSandbox({ podSandboxId: s.id });
      await client.runtime.removePodSandbox({ podSandboxId: s.id });
    }
    return items.length;
  } finally {
    client.close();
  }
}
