/**
 * The fake CRI runtime passes the same contract as containerd 2.x and 1.6, in both of
 * its flavours. Its busybox is scripted from the contract's table of programs.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cri } from '../index.ts';
import {
  criRuntimeContract,
  type CriRuntimeUnderTest,
} from '../../../test/contract/cri-runtime.contract.ts';
import { execOutcomeFor, startOutcomeFor } from '../../../test/contract/cri-programs.ts';
import { FakeCriClient, type FakeRuntimeFlavor } from './index.ts';

const REGISTRY = '127.0.0.1:5000';
const CREDENTIALS = { username: 'berth', password: 'fake-registry-secret' };
const POD_SUBNET = '10.88.7.0/24';

async function fakeRuntime(flavor: FakeRuntimeFlavor): Promise<CriRuntimeUnderTest> {
  const root = await mkdtemp(join(tmpdir(), 'berth-fake-cri-'));
  const client = new FakeCriClient({ flavor, podSubnet: POD_SUBNET });
  const busybox = `${REGISTRY}/berth/busybox:1.35.0`;
  client.addImage(busybox, { credentials: CREDENTIALS });
  client.onStart((c) => startOutcomeFor(c.command));
  client.onExec((_c, cmd) => execOutcomeFor(cmd));
  return {
    client,
    images: { busybox },
    credentials: CREDENTIALS,
    podConfig: (name) => {
      const uid = randomUUID();
      return cri.PodSandboxConfig.fromPartial({
        metadata: { name, uid, namespace: 'berth-test', attempt: 0 },
        hostname: name,
        logDirectory: join(root, 'pod-logs', uid),
        labels: { 'io.kubernetes.pod.name': name, 'io.kubernetes.pod.uid': uid },
        linux: {
          cgroupParent: `/berth-fake/pod${uid}`,
          securityContext: {
            namespaceOptions: { network: cri.NamespaceMode.POD, pid: cri.NamespaceMode.CONTAINER },
          },
        },
      });
    },
    missingImage: `${REGISTRY}/berth/does-not-exist:1.0`,
    podSubnet: POD_SUBNET,
    hasEvents: flavor === 'containerd2',
    readLog: (config, relPath) => readFile(join(config.logDirectory, relPath), 'utf8'),
    teardown: async () => {
      client.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}

criRuntimeContract('fake CRI runtime like containerd2', () => fakeRuntime('containerd2'));
criRuntimeContract('fake CRI runtime like containerd1', () => fakeRuntime('containerd1'));
