/**
 * Static pods from berth's staticPodPath and their mirror pods (issue #27, parts 1-3
 * and 6), on a real control plane, containerd and berth: a manifest dropped in starts
 * at once (inotify: the periodic re-read is set to minutes), appears as a mirror pod
 * with upstream's name, annotations and Node owner, is replaced when edited and
 * stopped when removed; deleting the mirror only brings it back; a SIGKILLed berth
 * adopts its static pods; bad manifests are reported and hurt nothing else.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { createServer } from '../../src/util/node-http.ts';
import type { Node, Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient, cri } from '../../src/cri/index.ts';
import { decodeStaticPod } from '../../src/podsource/static-pod.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  eventually,
  getJson,
  getPod,
  isRunningAndReady,
  waitForPod,
  type EventSummary,
} from '../harness/kube-helpers.ts';

function manifest(cluster: Cluster, name: string, command: string[], extra = ''): string {
  return [
    'apiVersion: v1',
    'kind: Pod',
    'metadata:',
    `  name: ${name}`,
    '  labels:',
    `    app: ${name}`,
    'spec:',
    '  terminationGracePeriodSeconds: 2',
    '  containers:',
    '  - name: main',
    `    image: ${cluster.images.busyboxLocal}`,
    '    imagePullPolicy: IfNotPresent',
    `    command: ${JSON.stringify(command)}`,
    extra,
    '',
  ].join('\n');
}

// The keeper's readiness probe stamps each run, so a test can count the probes a
// (restarted) berth ran instead of sleeping.
const KEEPER_PROBE = [
  '    readinessProbe:',
  '      exec:',
  '        command: ["sh", "-c", "date +%s >> /tmp/probed"]',
  '      periodSeconds: 1',
].join('\n');

describe('static pods and mirror pods on berth', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;
  let dir: string;
  let runtime: GrpcCriClient;
  let keeperContainer: string;
  /** What the staticPodURL answers (the test switches it). */
  let urlAnswer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.end();
  };
  const urlServer = createServer((req, res) => {
    urlAnswer(req, res);
  });

  /** The runtime's containers of a pod (by the CRI labels berth sets), newest first. */
  async function containersOf(podName: string): Promise<cri.Container[]> {
    const { containers } = await runtime.runtime.listContainers({
      filter: { labelSelector: { 'io.kubernetes.pod.name': podName } },
    });
    return containers.sort((a, b) => Number(b.createdAt - a.createdAt));
  }

  /** The keeper's probe runs so far, read through the runtime (berth may be down). */
  async function keeperProbes(): Promise<number> {
    const [c] = await running(`keeper-${node}`);
    const r = await runtime.runtime.execSync({
      containerId: c?.id ?? '',
      cmd: ['sh', '-c', 'cat /tmp/probed 2>/dev/null | wc -l'],
      timeout: 10n,
    });
    return Number(r.stdout.toString('utf8'));
  }

  async function running(podName: string): Promise<cri.Container[]> {
    return (await containersOf(podName)).filter(
      (c) => c.state === cri.ContainerState.CONTAINER_RUNNING,
    );
  }

  async function nodeEvents(): Promise<EventSummary[]> {
    const list = await getJson<{ items: EventSummary[] }>(cluster, [
      'get',
      'events',
      '-A',
      '--field-selector',
      `involvedObject.kind=Node,involvedObject.name=${node}`,
    ]);
    return list?.items ?? [];
  }

  before(async () => {
    cluster = await startCluster();
    dir = join(cluster.root, 'manifests');
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'keeper.yaml'),
      manifest(cluster, 'keeper', ['sleep', '3600'], KEEPER_PROBE),
    );
    await new Promise<void>((r) => urlServer.listen(0, '127.0.0.1', r));
    const port = (urlServer.address() as AddressInfo).port;
    berth = await startBerth(cluster, {
      // A period of minutes: whatever starts within seconds was woken by inotify.
      extraConfig: [
        `staticPodPath: ${dir}`,
        'fileCheckFrequency: 5m',
        `staticPodURL: http://127.0.0.1:${port}/pod`,
        'staticPodURLHeader:',
        '  X-Static-Token: ["t0ken"]',
        'httpCheckFrequency: 1s',
      ],
    });
    node = berth.nodeName;
    runtime = new GrpcCriClient(cluster.runtime.socket);
    const keeper = await waitForPod(
      cluster,
      'default',
      `keeper-${node}`,
      'Running',
      isRunningAndReady,
      90_000,
    );
    keeperContainer = keeper.status?.containerStatuses?.[0]?.containerID ?? '';
    assert.match(keeperContainer, /^containerd:\/\//);
  });

  after(async () => {
    // The static pod that was there from the start was never disturbed.
    const keeper = await getPod(cluster, 'default', `keeper-${node}`);
    assert.equal(keeper?.status?.containerStatuses?.[0]?.containerID, keeperContainer);
    assert.equal(keeper?.status?.containerStatuses?.[0]?.restartCount, 0);
    runtime.close();
    urlServer.closeAllConnections();
    urlServer.close();
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('a new manifest starts at once and is mirrored with the upstream name, annotations and owner', async () => {
    const file = join(dir, 'web.yaml');
    const text = manifest(cluster, 'web', ['sleep', '3600']);
    const started = Date.now();
    await writeFile(file, text);
    const [container] = await eventually(
      'the static pod container running',
      async () => {
        const r = await running(`web-${node}`);
        return r.length > 0 ? r : undefined;
      },
      30_000,
      100,
    );
    const elapsed = Date.now() - started;
    assert.ok(container);
    // The bound is 2 s; a loaded 2-core machine gets some slack.
    assert.ok(elapsed < 5000, `started after ${elapsed} ms`);

    const expected = decodeStaticPod(text, { nodeName: node, source: file, kind: 'file' }).pod;
    const uid = expected.metadata?.uid ?? '';
    assert.equal(container.labels['io.kubernetes.pod.uid'], uid);
    const mirror = await waitForPod(
      cluster,
      'default',
      `web-${node}`,
      'Running',
      isRunningAndReady,
      30_000,
    );
    const a = mirror.metadata?.annotations ?? {};
    assert.equal(a['kubernetes.io/config.hash'], uid);
    assert.equal(a['kubernetes.io/config.mirror'], uid);
    assert.equal(a['kubernetes.io/config.source'], 'file');
    assert.match(a['kubernetes.io/config.seen'] ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
    assert.notEqual(mirror.metadata?.uid, uid);
    assert.equal(mirror.metadata?.labels?.['app'], 'web');
    const nodeObj = await getJson<Node>(cluster, ['get', 'node', node]);
    assert.deepEqual(mirror.metadata?.ownerReferences, [
      { apiVersion: 'v1', kind: 'Node', name: node, uid: nodeObj?.metadata?.uid, controller: true },
    ]);
    assert.equal(mirror.spec?.nodeName, node);
    assert.deepEqual(mirror.spec?.tolerations, [{ operator: 'Exists', effect: 'NoExecute' }]);
    // Its status is the static pod's.
    assert.equal(
      mirror.status?.containerStatuses?.[0]?.containerID,
      `containerd://${container.id}`,
    );
  });

  test('kubectl delete on the mirror pod brings it back and leaves the containers alone', async () => {
    const before = await waitForPod(
      cluster,
      'default',
      `web-${node}`,
      'Running',
      isRunningAndReady,
    );
    const containerID = before.status?.containerStatuses?.[0]?.containerID;
    await cluster.kubectl(['delete', 'pod', `web-${node}`, '--wait=false']);
    const back = await waitForPod(
      cluster,
      'default',
      `web-${node}`,
      'recreated and Running',
      (p) => p.metadata?.uid !== before.metadata?.uid && isRunningAndReady(p),
      // Within the status manager's 10 s batch: the status follows the new mirror at once.
      8000,
    );
    assert.equal(back.status?.containerStatuses?.[0]?.containerID, containerID);
    assert.equal(back.status?.containerStatuses?.[0]?.restartCount, 0);
    assert.equal((await running(`web-${node}`)).length, 1);
  });

  test('an edited manifest is a new pod, started only once the old one has stopped', async () => {
    const old = await waitForPod(cluster, 'default', `web-${node}`, 'Running', isRunningAndReady);
    const oldHash = old.metadata?.annotations?.['kubernetes.io/config.hash'];
    const [oldContainer] = await running(`web-${node}`);
    assert.ok(oldContainer);
    await writeFile(join(dir, 'web.yaml'), manifest(cluster, 'web', ['sleep', '3601']));
    const now = await waitForPod(
      cluster,
      'default',
      `web-${node}`,
      'replaced by the new manifest',
      (p) =>
        p.metadata?.annotations?.['kubernetes.io/config.hash'] !== oldHash && isRunningAndReady(p),
      60_000,
    );
    assert.equal(
      now.metadata?.annotations?.['kubernetes.io/config.mirror'],
      now.metadata?.annotations?.['kubernetes.io/config.hash'],
    );
    const [newContainer, ...others] = await running(`web-${node}`);
    assert.ok(newContainer);
    assert.deepEqual(others, [], 'the old and the new pod never run side by side');
    assert.notEqual(newContainer.id, oldContainer.id);
    assert.deepEqual(newContainer.metadata?.name, 'main');
    const oldStatus = await runtime.runtime
      .containerStatus({ containerId: oldContainer.id })
      .then((s) => s.status)
      .catch(() => undefined);
    // The old container is gone or stopped, and stopped before the new one was created.
    if (oldStatus !== undefined) {
      assert.equal(oldStatus.state, cri.ContainerState.CONTAINER_EXITED);
      assert.ok(oldStatus.finishedAt <= newContainer.createdAt);
    }
  });

  test('a removed manifest stops its pod and deletes its mirror', async () => {
    await rm(join(dir, 'web.yaml'));
    await eventually(
      'the mirror pod deleted',
      async () =>
        (await getPod(cluster, 'default', `web-${node}`)) === undefined ? true : undefined,
      30_000,
    );
    await eventually(
      'the containers stopped',
      async () => ((await running(`web-${node}`)).length === 0 ? true : undefined),
      30_000,
    );
  });

  test('bad manifests: a log line and a Node event each, every other static pod untouched', async () => {
    const bad: Record<string, string> = {
      'broken.yaml': 'apiVersion: v1\nkind: Pod\nmetadata: {name: [broken\n',
      'deployment.yaml': 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n',
      'empty.yaml': 'apiVersion: v1\nkind: Pod\nmetadata: {name: empty}\nspec: {containers: []}\n',
    };
    for (const [name, text] of Object.entries(bad)) await writeFile(join(dir, name), text);
    await writeFile(
      join(dir, 'extra-field.yaml'),
      manifest(cluster, 'extra', ['sleep', '3600'], '    colour: red'),
    );
    await writeFile(join(dir, 'dup-a.yaml'), manifest(cluster, 'dup', ['sleep', '3600']));
    await writeFile(join(dir, 'dup-b.yaml'), manifest(cluster, 'dup', ['sleep', '3601']));
    await symlink('/etc/hostname', join(dir, 'outside.yaml'));
    await writeFile(join(dir, 'huge.yaml'), '');
    await truncate(join(dir, 'huge.yaml'), 50 * 1024 * 1024);
    const expectations: [string, RegExp][] = [
      ['broken.yaml', /error converting YAML/],
      ['deployment.yaml', /no kind "Deployment" is registered/],
      ['empty.yaml', /spec\.containers: Required value/],
      ['extra-field.yaml', /unknown field "spec\.containers\[0\]\.colour"/],
      ['dup-a.yaml', /duplicate pod name "dup-/],
      ['outside.yaml', /symlink leads outside/],
      ['huge.yaml', /read limit/],
    ];
    const events = await eventually(
      'a FailedValidation event for every bad manifest',
      async () => {
        const evs = (await nodeEvents()).filter((e) => e.reason === 'FailedValidation');
        const all = expectations.every(([file, re]) =>
          evs.some((e) => e.message.includes(join(dir, file)) && re.test(e.message)),
        );
        return all ? evs : undefined;
      },
      60_000,
    );
    assert.ok(events.every((e) => e.type === 'Warning'));
    const log = await readFile(berth.logFile, 'utf8');
    for (const [file] of expectations)
      assert.ok(log.includes(join(dir, file)), `berth's log names ${file}`);
    // The manifest with an unknown field still runs (upstream's decoder ignores it); the
    // later duplicate wins.
    await waitForPod(cluster, 'default', `extra-${node}`, 'Running', isRunningAndReady, 30_000);
    const dup = await waitForPod(
      cluster,
      'default',
      `dup-${node}`,
      'Running',
      isRunningAndReady,
      30_000,
    );
    assert.deepEqual(dup.spec?.containers[0]?.command, ['sleep', '3601']);
    const nodeObj = await getJson<Node>(cluster, ['get', 'node', node]);
    assert.equal(nodeObj?.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    for (const name of [
      ...Object.keys(bad),
      'extra-field.yaml',
      'dup-a.yaml',
      'dup-b.yaml',
      'outside.yaml',
      'huge.yaml',
    ])
      await rm(join(dir, name));
    await eventually(
      'the pods of removed manifests gone',
      async () =>
        (await running(`extra-${node}`)).length + (await running(`dup-${node}`)).length === 0
          ? true
          : undefined,
      30_000,
    );
  });

  test('staticPodURL: its pod runs; a 500 or a hang is reported and keeps the pod running', async () => {
    let token: string | undefined;
    urlAnswer = (req, res) => {
      token = req.headers['x-static-token'] as string | undefined;
      res.end(manifest(cluster, 'url', ['sleep', '3600']));
    };
    const pod = await waitForPod(
      cluster,
      'default',
      `url-${node}`,
      'Running',
      isRunningAndReady,
      30_000,
    );
    assert.equal(token, 't0ken');
    assert.equal(pod.metadata?.annotations?.['kubernetes.io/config.source'], 'http');
    const containerID = pod.status?.containerStatuses?.[0]?.containerID;
    urlAnswer = (_req, res) => {
      res.statusCode = 500;
      res.end('boom');
    };
    await eventually(
      'an event for the 500',
      async () =>
        (await nodeEvents()).some((e) => /\/pod: 500 Internal Server Error/.test(e.message))
          ? true
          : undefined,
      30_000,
    );
    urlAnswer = () => undefined; // hangs: berth's 10 s timeout
    await eventually(
      'an event for the hang',
      async () =>
        (await nodeEvents()).some((e) => /\/pod: timeout/.test(e.message)) ? true : undefined,
      40_000,
    );
    const still = await getPod(cluster, 'default', `url-${node}`);
    assert.equal(still?.status?.containerStatuses?.[0]?.containerID, containerID);
    assert.equal((await running(`url-${node}`)).length, 1);
    urlAnswer = (_req, res) => {
      res.end();
    };
    await eventually(
      'the URL pod gone after an empty answer',
      async () => ((await running(`url-${node}`)).length === 0 ? true : undefined),
      30_000,
    );
  });

  test('with the API server unreachable, a new static pod still starts', async () => {
    const apiserver = cluster.controlPlane.processes.find((p) => p.name === 'kube-apiserver');
    assert.ok(apiserver);
    process.kill(apiserver.pid, 'SIGSTOP');
    try {
      await writeFile(join(dir, 'offline.yaml'), manifest(cluster, 'offline', ['sleep', '3600']));
      await eventually(
        'the static pod running without the API',
        async () => ((await running(`offline-${node}`)).length === 1 ? true : undefined),
        30_000,
      );
      assert.equal((await running(`keeper-${node}`)).length, 1);
    } finally {
      process.kill(apiserver.pid, 'SIGCONT');
    }
    // Once the API is back, the mirror follows.
    await waitForPod(cluster, 'default', `offline-${node}`, 'Running', isRunningAndReady, 60_000);
    await rm(join(dir, 'offline.yaml'));
    await eventually(
      'the offline pod removed',
      async () =>
        (await getPod(cluster, 'default', `offline-${node}`)) === undefined ? true : undefined,
      30_000,
    );
  });

  test('kubectl logs and exec reach a static pod through its mirror', async () => {
    await writeFile(
      join(dir, 'talker.yaml'),
      manifest(cluster, 'talker', ['sh', '-c', 'echo hello from a static pod; sleep 3600']),
    );
    await waitForPod(cluster, 'default', `talker-${node}`, 'Running', isRunningAndReady, 30_000);
    const logs = await eventually(
      'the static pod logs',
      async () => {
        const out = await cluster.kubectl(['logs', `talker-${node}`]);
        return out.includes('hello from a static pod') ? out : undefined;
      },
      30_000,
    );
    assert.match(logs, /hello from a static pod/);
    const out = await cluster.kubectl(['exec', `talker-${node}`, '--', 'echo', 'exec works']);
    assert.equal(out.trim(), 'exec works');
    await rm(join(dir, 'talker.yaml'));
    await eventually(
      'the talker pod gone',
      async () =>
        (await getPod(cluster, 'default', `talker-${node}`)) === undefined ? true : undefined,
      30_000,
    );
  });

  test('berth SIGKILLed and restarted adopts its static pods without restarting them', async () => {
    const mirror = await waitForPod(
      cluster,
      'default',
      `keeper-${node}`,
      'Running',
      isRunningAndReady,
    );
    const logged = (await readFile(berth.logFile, 'utf8')).length;
    await berth.kill();
    const probedBefore = await keeperProbes();
    berth = await berth.restart();
    // Long enough for the restarted berth to have read the manifests and synced the pod.
    await eventually(
      'the restarted berth reading its manifests',
      async () =>
        (await readFile(berth.logFile, 'utf8')).slice(logged).includes('Static pod added')
          ? true
          : undefined,
      60_000,
    );
    // The restarted berth synced the pod (its probe workers run) and probed it twice.
    await eventually(
      'two probes of the keeper by the restarted berth',
      async () => ((await keeperProbes()) >= probedBefore + 2 ? true : undefined),
      60_000,
    );
    const after: Pod | undefined = await getPod(cluster, 'default', `keeper-${node}`);
    assert.equal(after?.metadata?.uid, mirror.metadata?.uid, 'the mirror pod was kept');
    assert.equal(after?.status?.containerStatuses?.[0]?.containerID, keeperContainer);
    assert.equal(after?.status?.containerStatuses?.[0]?.restartCount, 0);
    const containers = await containersOf(`keeper-${node}`);
    assert.equal(containers.length, 1);
    assert.equal(`containerd://${containers[0]?.id ?? ''}`, keeperContainer);
  });
});
