/**
 * berth's kubelet API route by route (issue #7), straight against :10250 with the real
 * API server doing TokenReview and SubjectAccessReview: the authorization matrix over
 * every route (each fine-grained subresource and the proxy fallback, by RBAC), the
 * read-only port when turned on, streamingConnectionIdleTimeout, and SPDY channel
 * protocol negotiation relayed from the runtime.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import {
  callBerth,
  openUpgrade,
  spdyHeaders,
  websocketHeaders,
  type ClientCert,
} from '../harness/kubelet-api-client.ts';
import { fetchLocal, freePort } from '../harness/net.ts';
import { makeCa, makeLeaf } from '../harness/pki.ts';

const IDLE_TIMEOUT_S = 8;

/** Every route with the subresources (on nodes) that authorize it, in upstream's order. */
const ROUTES: readonly { method: string; path: string; subresources: readonly string[] }[] = [
  { method: 'GET', path: '/healthz', subresources: ['healthz', 'proxy'] },
  { method: 'GET', path: '/pods', subresources: ['pods', 'proxy'] },
  { method: 'GET', path: '/runningpods/', subresources: ['pods', 'proxy'] },
  { method: 'GET', path: '/configz', subresources: ['configz', 'proxy'] },
  { method: 'GET', path: '/stats/summary', subresources: ['stats'] },
  { method: 'GET', path: '/metrics', subresources: ['metrics'] },
  { method: 'GET', path: '/metrics/resource', subresources: ['metrics'] },
  { method: 'GET', path: '/metrics/probes', subresources: ['metrics'] },
  { method: 'GET', path: '/metrics/cadvisor', subresources: ['metrics'] },
  { method: 'GET', path: '/logs/', subresources: ['log'] },
  { method: 'GET', path: '/containerLogs/default/app/main', subresources: ['proxy'] },
  { method: 'POST', path: '/run/default/app/main?cmd=echo%20ran', subresources: ['proxy'] },
];
const SUBRESOURCES = ['healthz', 'pods', 'configz', 'stats', 'metrics', 'log', 'proxy'] as const;

describe('kubelet API routes on containerd2', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let port: number;
  let readOnlyPort: number;
  let ca: Buffer;
  const users = new Map<string, ClientCert>();
  const kubectl = (args: readonly string[], okCodes?: readonly number[]) =>
    run(cluster.bin.kubectl, ['--kubeconfig', cluster.adminKubeconfig, ...args], {
      ...(okCodes !== undefined && { okCodes }),
      timeoutMs: 60_000,
    });

  /** A ClusterRole on nodes/<subresource> (get, create) bound to `subject`. */
  async function grant(name: string, subresource: string, subject: object): Promise<void> {
    await applyJson(cluster, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name },
      rules: [{ apiGroups: [''], resources: [`nodes/${subresource}`], verbs: ['get', 'create'] }],
    });
    await applyJson(cluster, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [subject],
    });
  }

  /** A client certificate for `user` from `issuer` (the cluster CA unless given). */
  async function certFor(user: string, issuer = cluster.pki.ca): Promise<ClientCert> {
    const dir = join(cluster.root, 'routes-pki');
    await mkdir(dir, { recursive: true });
    const pair = await makeLeaf(dir, issuer, {
      name: user,
      subject: `/CN=${user}`,
      usage: 'clientAuth',
    });
    return { cert: await readFile(pair.cert), key: await readFile(pair.key) };
  }

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    readOnlyPort = await freePort();
    berth = await startBerth(cluster, {
      extraConfig: [
        `readOnlyPort: ${readOnlyPort}`,
        `streamingConnectionIdleTimeout: ${IDLE_TIMEOUT_S}s`,
      ],
    });
    port = Number(/^port: (\d+)$/m.exec(await readFile(berth.configFile, 'utf8'))?.[1]);
    ca = await readFile(cluster.pki.ca.cert);
    await applyJson(
      cluster,
      busyboxPod(cluster, 'app', berth.nodeName, {
        command: ['sh', '-c', 'echo app-log-line; sleep 3600'],
      }),
    );
    for (const sub of SUBRESOURCES) {
      const user = `kubelet-${sub}-user`;
      await grant(`kubelet-${sub}`, sub, {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'User',
        name: user,
      });
      users.set(sub, await certFor(user));
    }
    // berth caches denials for 30 s: wait for RBAC before asking it anything.
    for (const sub of SUBRESOURCES)
      await eventually(`RBAC for nodes/${sub}`, async () => {
        const r = await kubectl(
          ['auth', 'can-i', 'create', 'nodes', '--subresource', sub, '--as', `kubelet-${sub}-user`],
          [0, 1],
        );
        return r.stdout.trim() === 'yes' ? true : undefined;
      });
    await waitForPod(cluster, 'default', 'app', 'running', isRunningAndReady, 90_000);
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('auth matrix over every route: 401, 403, and each subresource or the proxy fallback', async () => {
    const nobody = await certFor('nobody');
    const otherCaDir = join(cluster.root, 'other-ca');
    await mkdir(otherCaDir, { recursive: true });
    const otherCa = await makeCa(otherCaDir, 'ca', 'other-ca');
    // Named as a member of system:masters, but from a CA berth does not trust.
    const foreign = await certFor('admin', otherCa);
    const call = (route: (typeof ROUTES)[number], client?: ClientCert) =>
      callBerth(port, ca, route.path, client, {}, route.method);
    for (const route of ROUTES) {
      const what = `${route.method} ${route.path}`;
      assert.equal((await call(route)).status, 401, `${what} without credentials`);
      assert.equal((await call(route, foreign)).status, 401, `${what} from another CA`);
      const denied = await call(route, nobody);
      assert.equal(denied.status, 403, `${what} without RBAC`);
      assert.ok(
        denied.body.includes(`subresource(s)=[${route.subresources.join(', ')}]`),
        `${what}: ${denied.body}`,
      );
      for (const sub of SUBRESOURCES) {
        const answer = await call(route, users.get(sub));
        const expected = route.subresources.includes(sub) ? 200 : 403;
        assert.equal(answer.status, expected, `${what} with nodes/${sub}: ${answer.body}`);
      }
    }
    const proxy = users.get('proxy');
    assert.ok(proxy !== undefined);
    const logs = await callBerth(port, ca, '/containerLogs/default/app/main', proxy);
    assert.equal(logs.body, 'app-log-line\n');
    const ran = await callBerth(port, ca, ROUTES.at(-1)?.path ?? '', proxy, {}, 'POST');
    assert.equal(ran.body, 'ran\n');
    // A service account token: reviewed by the API server, authorized by its RBAC.
    await kubectl(['create', 'serviceaccount', 'stats-reader']);
    await grant('kubelet-stats-sa', 'stats', {
      kind: 'ServiceAccount',
      name: 'stats-reader',
      namespace: 'default',
    });
    const token = (await kubectl(['create', 'token', 'stats-reader'])).stdout.trim();
    const bearer = { Authorization: `Bearer ${token}` };
    await eventually('RBAC for the service account', async () => {
      const r = await kubectl(
        [
          'auth',
          'can-i',
          'get',
          'nodes',
          '--subresource',
          'stats',
          '--as',
          'system:serviceaccount:default:stats-reader',
        ],
        [0, 1],
      );
      return r.stdout.trim() === 'yes' ? true : undefined;
    });
    const summary = await callBerth(port, ca, '/stats/summary', undefined, bearer);
    assert.equal(summary.status, 200, summary.body);
    assert.ok(summary.body.includes('"name":"app"'));
    assert.equal((await callBerth(port, ca, '/pods', undefined, bearer)).status, 403);
    // A WebSocket exec needs create on nodes/proxy: the proxy user has it.
    const ws = openUpgrade(
      port,
      ca,
      '/exec/default/app/main?command=echo&command=ws-ok&stdout=1',
      proxy,
      websocketHeaders(['v4.channel.k8s.io']),
    );
    await eventually('the WebSocket exec output', () =>
      Promise.resolve(ws.received().includes('ws-ok') ? true : undefined),
    );
    ws.socket.destroy();
    assert.match(ws.received(), /^HTTP\/1\.1 101/);
  });

  test('the read-only port serves pods, stats and metrics without credentials, and nothing else', async () => {
    const get = (path: string, method = 'GET') =>
      fetchLocal(`http://127.0.0.1:${readOnlyPort}${path}`, { method });
    const pods = await get('/pods');
    assert.equal(pods.status, 200);
    const list = JSON.parse(pods.body.toString()) as { items: { metadata: { name: string } }[] };
    assert.ok(list.items.some((p) => p.metadata.name === 'app'));
    assert.equal((await get('/healthz')).body.toString(), 'ok');
    const summary = await get('/stats/summary');
    assert.equal(summary.status, 200);
    assert.ok(summary.body.toString().includes('"name":"app"'));
    assert.match(
      (await get('/metrics/resource')).body.toString(),
      /^pod_memory_working_set_bytes/m,
    );
    assert.match(
      (await get('/metrics')).body.toString(),
      /kubelet_http_requests_total\{[^}]*path="pods"[^}]*server_type="readonly"/,
    );
    assert.match(
      (await get('/metrics/cadvisor')).body.toString(),
      /^container_memory_working_set_bytes\{container="main",namespace="default",pod="app"\} \d+/m,
    );
    for (const [path, method] of [
      ['/containerLogs/default/app/main', 'GET'],
      ['/exec/default/app/main?command=id&stdout=1', 'GET'],
      ['/run/default/app/main?cmd=id', 'POST'],
      ['/runningpods/', 'GET'],
      ['/configz', 'GET'],
      ['/logs/', 'GET'],
    ] as const) {
      const r = await get(path, method);
      assert.equal(r.status, 404, `${method} ${path}: ${r.body.toString()}`);
    }
  });

  test('streamingConnectionIdleTimeout closes an idle stream and spares a busy one', async () => {
    const admin: ClientCert = {
      cert: await readFile(cluster.pki.kubeletClient.cert),
      key: await readFile(cluster.pki.kubeletClient.key),
    };
    const open = (command: string) =>
      openUpgrade(
        port,
        ca,
        `/exec/default/app/main?${command}&stdout=1`,
        admin,
        websocketHeaders(['v4.channel.k8s.io']),
      );
    const idle = open('command=sleep&command=120');
    const busy = open(
      'command=sh&command=-c&command=while%20true;%20do%20echo%20tick;%20sleep%201;%20done',
    );
    await eventually('both streams upgraded', () =>
      Promise.resolve(
        idle.received().startsWith('HTTP/1.1 101') && busy.received().includes('tick')
          ? true
          : undefined,
      ),
    );
    const closedInTime = await Promise.race([
      idle.closed.then(() => true),
      sleep(60_000).then(() => false),
    ]);
    assert.ok(closedInTime, 'the idle stream was closed well before its command ended');
    let busyClosed = false;
    void busy.closed.then(() => (busyClosed = true));
    await sleep((IDLE_TIMEOUT_S + 4) * 1000);
    assert.equal(busyClosed, false, 'the stream with output every second stays open');
    busy.socket.destroy();
    const log = await readFile(join(berth.dir, 'berth.log'), 'utf8');
    assert.match(log, /Closing an idle stream/);
  });

  // The API server offers v5 first and falls back; the CRI streaming server in
  // containerd speaks SPDY up to v4, and what it picks must reach the caller unchanged
  // (berth has no channel protocol of its own, as upstream's kubelet has none for CRI).
  test("SPDY offering v5 and v4: berth relays the runtime's choice", async () => {
    const proxy = users.get('proxy');
    assert.ok(proxy !== undefined);
    const stream = openUpgrade(
      port,
      ca,
      '/exec/default/app/main?command=true&stdout=1',
      proxy,
      spdyHeaders(['v5.channel.k8s.io', 'v4.channel.k8s.io']),
    );
    await eventually('the SPDY handshake answer', () =>
      Promise.resolve(stream.received().includes('\r\n\r\n') ? true : undefined),
    );
    stream.socket.destroy();
    const head = stream.received().split('\r\n\r\n')[0] ?? '';
    assert.match(head, /^HTTP\/1\.1 101/);
    assert.match(head, /^upgrade: SPDY\/3\.1$/im);
    assert.match(head, /^x-stream-protocol-version: v4\.channel\.k8s\.io$/im);
  });
});
