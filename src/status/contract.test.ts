/** The PodStatusManager contract against StatusManager over the fake API and the fake. */
import type { Pod } from 'kubernetes-types/core/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, PODS } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { podStatusManagerContract } from './contract.ts';
import { FakeStatusManager } from './fake.ts';
import { StatusManager } from './manager.ts';

const pods = inNamespace(PODS, 'ns');
const spec = { containers: [{ name: 'main', image: 'busybox:1' }] };

podStatusManagerContract('StatusManager (fake API client)', async () => {
  const client = new FakeKubeClient();
  const pod = await client.create<Pod>(pods, { metadata: { name: 'p', namespace: 'ns' }, spec });
  const status = new StatusManager({ client, clock: new FakeClock(), logger: new MemoryLogger() });
  return {
    status,
    pod,
    apiStatus: async () => (await client.get<Pod>(pods, 'p')).status,
    writes: () => client.calls.filter((c) => c.verb === 'patch').length,
  };
});

podStatusManagerContract('FakeStatusManager', () => {
  const status = new FakeStatusManager();
  const pod: Pod = { metadata: { name: 'p', namespace: 'ns', uid: 'uid-p' }, spec };
  return Promise.resolve({
    status,
    pod,
    apiStatus: () => Promise.resolve(status.api.get('uid-p')),
    writes: () => status.writes.length,
  });
});
