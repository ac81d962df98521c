/**
 * Static pods without an API server (issue #27, part 4 and the start-up gap a kubeadm
 * control plane hits, its API server being one of berth's static pods), on a real
 * control plane, containerd and berth:
 *
 * - berth started while the API server is stopped runs its static pods at once; once
 *   the API server is back, the Node registers and the mirror pod carries the running
 *   pod's status;
 * - berth with no --kubeconfig (standalone) runs its static pods alone, registers
 *   nothing, and serves /healthz, /pods, logs and exec on the kubelet API to an x509
 *   client certificate (webhook authentication off, authorization AlwaysAllow);
 * - a standalone configuration asking for webhook authentication or authorization is
 *   refused at start, naming the field.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { GrpcCriClient, cri } from '../../src/cri/index.ts';
import { BERTH_LAUNCHER, startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import { kernelTunableProblems } from '../../src/cm/kernel-tunables.ts';
import {
  eventually,
  getJson,
  getPod,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { callBerth, openUpgrade, websocketHeaders } from '../harness/kubelet-api-client.ts';

function manifest(cluster: Cluster, name: string, command: string[]): string {
  return [
    'apiVersion: v1',
    'kind: Pod',
    'metadata:',
    `  name: ${name}`,
    'spec:',
    '  terminationGracePeriodSeconds: 2',
    '  containers:',
    '  - name: main',
    `    image: ${cluster.images.busyboxLocal}`,
    '    imagePullPolicy: IfNotPresent',
    `    command: ${JSON.stringify(command)}`,
    '',
  ].join('\n');
}

describe('static pods without an API server', () => {
  let cluster: Cluster;
  let runtime: GrpcCriClient;
  const berths: BerthNode[] = [];

  async function running(podName: string): Promise<cri.Container[]> {
    const { containers } = await runtime.runtime.listContainers({
      filter: { labelSelector: { 'io.kubernetes.pod.name': podName } },
    });
    return containers.filter((c) => c.state === cri.ContainerState.CONTAINER_RUNNING);
  }

  before(async () => {
    cluster = await startCluster();
    runtime = new GrpcCriClient(cluster.runtime.socket);
  });

  after(async () => {
    runtime.close();
    for (const b of berths) await b.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('started while the API server is down: static pods run; the node and the mirror follow', async () => {
    const nodeName = `late-${cluster.id}`;
    const dir = join(cluster.root, 'late-manifests');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'early.yaml'), manifest(cluster, 'early', ['sleep', '3600']));
    const apiserver = cluster.controlPlane.processes.find((p) => p.name === 'kube-apiserver');
    assert.ok(apiserver);
    // Stopped, not killed: the port still accepts connections that never answer, the
    // harder case (a refused connection fails fast).
    process.kill(apiserver.pid, 'SIGSTOP');
    let berth: BerthNode;
    let containerID: string;
    try {
      berth = await startBerth(cluster, { nodeName, extraConfig: [`staticPodPath: ${dir}`] });
      berths.push(berth);
      const [container] = await eventually(
        'the static pod running with the API server stopped',
        async () => {
          const c = await running(`early-${nodeName}`);
          return c.length === 1 ? c : undefined;
        },
        90_000,
      );
      containerID = container?.id ?? '';
      const log = await readFile(berth.logFile, 'utf8');
      assert.doesNotMatch(log, /Successfully registered node/);
    } finally {
      process.kill(apiserver.pid, 'SIGCONT');
    }
    const mirror = await waitForPod(
      cluster,
      'default',
      `early-${nodeName}`,
      'Running',
      isRunningAndReady,
      120_000,
    );
    assert.equal(mirror.metadata?.annotations?.['kubernetes.io/config.mirror'] !== undefined, true);
    assert.equal(mirror.metadata?.ownerReferences?.[0]?.kind, 'Node');
    assert.equal(mirror.status?.containerStatuses?.[0]?.containerID, `containerd://${containerID}`);
    assert.equal(mirror.status?.containerStatuses?.[0]?.restartCount, 0);
    const node = await getJson<{ metadata: { uid: string } }>(cluster, ['get', 'node', nodeName]);
    assert.equal(mirror.metadata?.ownerReferences?.[0]?.uid, node?.metadata.uid);
    await eventually(
      'the node Ready',
      async () => {
        const n = await getJson<{ status: { conditions: { type: string; status: string }[] } }>(
          cluster,
          ['get', 'node', nodeName],
        );
        return n?.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True')
          ? true
          : undefined;
      },
      60_000,
    );
    await berth.stop();
  });

  test('standalone: no kubeconfig, a static pod runs; logs, exec, /pods and /healthz are served', async () => {
    const nodeName = `alone-${cluster.id}`;
    const dir = join(cluster.root, 'alone-manifests');
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'solo.yaml'),
      manifest(cluster, 'solo', ['sh', '-c', 'echo hello from standalone; sleep 3600']),
    );
    const berth = await startBerth(cluster, {
      nodeName,
      standalone: true,
      extraConfig: [`staticPodPath: ${dir}`],
    });
    berths.push(berth);
    const pod = `solo-${nodeName}`;
    await eventually(
      'the standalone static pod running',
      async () => ((await running(pod)).length === 1 ? true : undefined),
      90_000,
    );
    const config = await readFile(berth.configFile, 'utf8');
    const port = Number(/^port: (\d+)$/m.exec(config)?.[1]);
    const healthzPort = Number(/^healthzPort: (\d+)$/m.exec(config)?.[1]);
    const ca = await readFile(cluster.pki.ca.cert);
    const client = {
      cert: await readFile(cluster.pki.kubeletClient.cert),
      key: await readFile(cluster.pki.kubeletClient.key),
    };
    // Without a client certificate: anonymous is off by default in a config file.
    assert.equal((await callBerth(port, ca, '/pods')).status, 401);
    const logs = await eventually(
      'the static pod logs on the kubelet API',
      async () => {
        const r = await callBerth(port, ca, `/containerLogs/default/${pod}/main`, client);
        return r.status === 200 && r.body.includes('hello from standalone') ? r.body : undefined;
      },
      30_000,
    );
    assert.match(logs, /hello from standalone/);
    const pods = JSON.parse((await callBerth(port, ca, '/pods', client)).body) as {
      items: { metadata: { name: string; annotations?: Record<string, string> } }[];
    };
    const listed = pods.items.find((p) => p.metadata.name === pod);
    assert.equal(listed?.metadata.annotations?.['kubernetes.io/config.source'], 'file');
    const stream = openUpgrade(
      port,
      ca,
      `/exec/default/${pod}/main?command=echo&command=standalone-exec&stdout=1&stderr=1`,
      client,
      websocketHeaders(['v4.channel.k8s.io']),
    );
    await eventually('the exec output', () =>
      Promise.resolve(stream.received().includes('standalone-exec') ? true : undefined),
    );
    stream.socket.destroy();
    assert.match(stream.received(), /^HTTP\/1\.1 101/);
    const healthz = await fetch(`http://127.0.0.1:${healthzPort}/healthz`);
    assert.equal(healthz.status, 200);
    assert.equal(await healthz.text(), 'ok');
    // Nothing reached the API server: no Node, no mirror pod.
    assert.equal(await getJson(cluster, ['get', 'node', nodeName]), undefined);
    assert.equal(await getPod(cluster, 'default', pod), undefined);
    const log = await readFile(berth.logFile, 'utf8');
    assert.match(log, /Standalone mode, no API client/);
    assert.doesNotMatch(log, /Unable to register node|Failed to renew lease/);
  });

  test('standalone: a configuration with webhook authentication or authorization is refused', async () => {
    const berth = berths.at(-1);
    assert.ok(berth);
    const base = await readFile(berth.configFile, 'utf8');
    const cases = [
      {
        config: base.replace('    enabled: false', '    enabled: true'),
        message:
          /no client provided, cannot use webhook authentication: authentication\.webhook\.enabled must be false/,
      },
      {
        config: base.replace('  mode: AlwaysAllow', '  mode: Webhook'),
        message:
          /no client provided, cannot use webhook authorization: authorization\.mode must be AlwaysAllow/,
      },
    ];
    for (const [i, c] of cases.entries()) {
      assert.notEqual(c.config, base);
      const file = join(berth.dir, `refused-${String(i)}.yaml`);
      await writeFile(file, c.config);
      const out = await run(
        BERTH_LAUNCHER,
        ['--config', file, '--hostname-override', 'refused', '--root-dir', join(berth.dir, 'x')],
        { okCodes: [2], timeoutMs: 60_000 },
      );
      assert.equal(out.exitCode, 2);
      assert.match(out.stderr, c.message);
    }
  });

  test("protectKernelDefaults: true refuses to start on a host whose kernel settings differ from upstream's", async (t) => {
    const berth = berths.at(-1);
    assert.ok(berth);
    // Read the host's own settings: the refusal must name exactly the ones that differ.
    const problems = await kernelTunableProblems();
    if (problems.length === 0) {
      t.skip('this host already has every setting upstream wants: nothing to refuse');
      return;
    }
    const file = join(berth.dir, 'protect-kernel.yaml');
    await writeFile(
      file,
      `${await readFile(berth.configFile, 'utf8')}protectKernelDefaults: true\n`,
    );
    const out = await run(
      BERTH_LAUNCHER,
      ['--config', file, '--hostname-override', 'refused', '--root-dir', join(berth.dir, 'y')],
      { okCodes: [1], timeoutMs: 60_000 },
    );
    assert.equal(out.exitCode, 1);
    assert.match(out.stderr, /berth: Failed to start ContainerManager: /);
    for (const p of problems) assert.ok(out.stderr.includes(p), `${p} in ${out.stderr}`);
  });
});
