/** The NodeLeaseController contract against LeaseController over the fake API and the fake. */
import type { Lease } from 'kubernetes-types/coordination/v1.js';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { inNamespace, LEASES } from '../kube/types.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { LEASE_CONTRACT, nodeLeaseContract } from './contract.ts';
import { LEASE_NAMESPACE, LeaseController } from './controller.ts';
import { FakeLeaseController } from './fake.ts';

const START = Date.UTC(2026, 0, 1);

nodeLeaseContract('LeaseController (fake API client)', () => {
  const clock = new FakeClock(START);
  const client = new FakeKubeClient();
  const lease = new LeaseController({
    client,
    clock,
    logger: new MemoryLogger(),
    ...LEASE_CONTRACT,
    nodeUID: () => 'node-uid',
  });
  return {
    lease,
    clock,
    stored: () => client.objects<Lease>(inNamespace(LEASES, LEASE_NAMESPACE))[0],
    failNextRenewal: () => {
      // The known Lease's update, then the re-read it falls back to.
      client.failNext({ error: new Error('apiserver down'), times: 2 });
    },
  };
});

nodeLeaseContract('FakeLeaseController', () => {
  const clock = new FakeClock(START);
  const lease = new FakeLeaseController({ clock, ...LEASE_CONTRACT });
  return {
    lease,
    clock,
    stored: () => lease.lease,
    failNextRenewal: () => {
      lease.failNext = new Error('apiserver down');
    },
  };
});
