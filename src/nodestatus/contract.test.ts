/** The NodeStatusController contract against NodeStatusManager (fake API, fake CRI) and the fake. */
import { FakeCriClient } from '../cri/fake/index.ts';
import { MemoryEventRecorder } from '../events/types.ts';
import { FakeKubeClient } from '../kube/fake-client.ts';
import { NODES } from '../kube/types.ts';
import type { Node } from 'kubernetes-types/core/v1.js';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { CONTRACT_HOST, NODE_STATUS_CONTRACT, nodeStatusContract } from './contract.ts';
import { FakeNodeStatusManager } from './fake.ts';
import { NodeStatusManager } from './manager.ts';

const START = Date.UTC(2026, 0, 1);

nodeStatusContract('NodeStatusManager (fake API client, fake CRI)', () => {
  const clock = new FakeClock(START);
  const client = new FakeKubeClient({ clock });
  const cri = new FakeCriClient({ clock });
  const problems: string[] = [];
  const ctl = new NodeStatusManager({
    client,
    clock,
    logger: new MemoryLogger(),
    host: CONTRACT_HOST,
    runtime: cri.runtime,
    images: cri.image,
    maxImages: 50,
    recorder: new MemoryEventRecorder(),
    taints: [],
    nodeIPs: ['10.0.0.1'],
    kubeletPort: 10250,
    evictionMemoryBytes: 0,
    evictionNodefsFraction: 0,
    healthProblems: () => problems,
    ...NODE_STATUS_CONTRACT,
  });
  return {
    ctl,
    clock,
    problems,
    stored: () => client.objects<Node>(NODES)[0],
    deleteStored: () => client.delete(NODES, NODE_STATUS_CONTRACT.nodeName),
    failNextSync: () => {
      client.failNext({ error: new Error('apiserver down') });
    },
  };
});

nodeStatusContract('FakeNodeStatusManager', () => {
  const clock = new FakeClock(START);
  const problems: string[] = [];
  const ctl = new FakeNodeStatusManager({
    clock,
    host: CONTRACT_HOST,
    healthProblems: () => problems,
    ...NODE_STATUS_CONTRACT,
  });
  return {
    ctl,
    clock,
    problems,
    stored: () => ctl.stored,
    deleteStored: () => {
      ctl.stored = undefined;
      return Promise.resolve();
    },
    failNextSync: () => {
      ctl.failNext = new Error('apiserver down');
    },
  };
});
