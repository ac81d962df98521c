/** Test support (unit tests only): waiting on real file I/O while time is fake. */
import type { KubeClient } from '../kube/types.ts';
import type { FakeKubeClient } from '../kube/fake-client.ts';

/** Yields to the event loop until `cond` holds (file I/O completes on real time), or throws. */
export async function until(cond: () => boolean, what: string, limitMs = 5000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise<void>((r) => setImmediate(r));
  }
}

/** The fake, minus close(): code that closes its client must not end the approver's watch. */
export function unclosable(fake: FakeKubeClient): KubeClient {
  return {
    get: (p, n, o) => fake.get(p, n, o),
    list: (p, o) => fake.list(p, o),
    create: (p, b, o) => fake.create(p, b, o),
    update: (p, n, b, o) => fake.update(p, n, b, o),
    patch: (p, n, b, t, o) => fake.patch(p, n, b, t, o),
    delete: (p, n, o) => fake.delete(p, n, o),
    watch: (p, o) => fake.watch(p, o),
    close: () => Promise.resolve(),
  };
}
