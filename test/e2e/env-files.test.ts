/**
 * env[].valueFrom.fileKeyRef (EnvFiles, beta and on by default at v1.37) on berth: an
 * init container writes an env file into an emptyDir and the app container gets the
 * key's value; a missing key is CreateContainerConfigError with upstream's message and an
 * optional one is skipped.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { applyJson, busyboxPod, eventually, waitForPod } from '../harness/kube-helpers.ts';

function envFilePod(
  cluster: Cluster,
  name: string,
  node: string,
  key: string,
  optional: boolean,
): Pod {
  const pod = busyboxPod(cluster, name, node, {
    command: ['sh', '-c', 'echo "V=[$V]"; sleep 3600'],
    extraSpec: { volumes: [{ name: 'config', emptyDir: {} }] },
  });
  const main = pod.spec?.containers[0];
  assert.ok(main !== undefined && pod.spec !== undefined);
  return {
    ...pod,
    spec: {
      ...pod.spec,
      initContainers: [
        {
          name: 'write',
          image: main.image ?? '',
          imagePullPolicy: 'IfNotPresent',
          command: [
            'sh',
            '-c',
            'printf "# made by the init container\\nGREETING=\'hello from a file\'\\n" > /config/app.env',
          ],
          volumeMounts: [{ name: 'config', mountPath: '/config' }],
        },
      ],
      containers: [
        {
          ...main,
          env: [
            {
              name: 'V',
              valueFrom: {
                fileKeyRef: { volumeName: 'config', path: 'app.env', key, optional },
              },
            } as never,
          ],
        },
      ],
    },
  };
}

describe('env files (fileKeyRef) on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
  });

  after(async () => {
    await berth?.stop();
    await cluster?.stop();
  });

  test("the key's value from the file an init container wrote", async () => {
    await applyJson(cluster, envFilePod(cluster, 'reads', berth.nodeName, 'GREETING', false));
    await waitForPod(
      cluster,
      'default',
      'reads',
      'Running',
      (p) => p.status?.phase === 'Running',
      90_000,
    );
    await eventually('the variable in the logs', async () => {
      const logs = await cluster.kubectl(['logs', 'reads', '-c', 'main']);
      return logs.includes('V=[hello from a file]') ? true : undefined;
    });
  });

  test('a missing key is CreateContainerConfigError; an optional one is skipped', async () => {
    await applyJson(cluster, envFilePod(cluster, 'missing', berth.nodeName, 'NOPE', false));
    const pod = await waitForPod(
      cluster,
      'default',
      'missing',
      'CreateContainerConfigError',
      (p) =>
        p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
      90_000,
    );
    assert.match(
      pod.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '',
      /environment variable key "NOPE" not found in file ".*\/volumes\/kubernetes\.io~empty-dir\/config\/app\.env"/,
    );
    await applyJson(cluster, envFilePod(cluster, 'optional', berth.nodeName, 'NOPE', true));
    await waitForPod(
      cluster,
      'default',
      'optional',
      'Running',
      (p) => p.status?.phase === 'Running',
      90_000,
    );
    await eventually('the empty variable in the logs', async () => {
      const logs = await cluster.kubectl(['logs', 'optional', '-c', 'main']);
      return logs.includes('V=[]') ? true : undefined;
    });
  });
});
