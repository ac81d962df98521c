/** The PodAdmission contract against AdmissionManager (a roomy Node) and the fake. */
import type { Node, PodStatus } from 'kubernetes-types/core/v1.js';
import { MemoryEventRecorder } from '../events/types.ts';
import { MemoryLogger } from '../util/logger.ts';
import { podAdmissionContract } from './contract.ts';
import { FakePodAdmission } from './fake.ts';
import { AdmissionManager } from './manager.ts';

const node: Node = {
  metadata: { name: 'node-a', labels: {} },
  status: { allocatable: { cpu: '8', memory: '16Gi', pods: '110' } },
};

podAdmissionContract('AdmissionManager', (handlers) => {
  const recorder = new MemoryEventRecorder();
  const statuses = new Map<string, PodStatus>();
  return {
    admission: new AdmissionManager({
      node: () => node,
      pods: () => new Map(),
      phase: (uid) => statuses.get(uid)?.phase,
      setStatus: (p, s) => statuses.set(p.metadata?.uid ?? '', s),
      recorder,
      logger: new MemoryLogger(),
      handlers,
    }),
    recorder,
    statuses,
  };
});

podAdmissionContract('FakePodAdmission', (handlers) => {
  const recorder = new MemoryEventRecorder();
  const statuses = new Map<string, PodStatus>();
  return {
    admission: new FakePodAdmission({
      setStatus: (p, s) => statuses.set(p.metadata?.uid ?? '', s),
      recorder,
      logger: new MemoryLogger(),
      handlers,
    }),
    recorder,
    statuses,
  };
});
