/**
 * The kubelet API under a connection flood from loopback (issue #32, hostile input):
 * 2000 connections to :10250 and the healthz port at once, of four kinds, held while
 * the test checks that berth still answers and still manages pods:
 * - idle TCP (connected, never a byte: a half-open TLS handshake from the server's view),
 * - a TLS ClientHello cut short (the handshake never finishes),
 * - slowloris: TLS done, request headers trickled one line every few seconds,
 * - churn: connections opened and reset at once, over and over.
 * berth must keep answering /healthz and authenticated API requests, start a pod created
 * during the flood, and give its file descriptors back once the flood is gone.
 * FAULTS_AGENT=upstream floods the upstream kubelet in the same harness (RELIABILITY.md
 * puts both side by side).
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { connect as netConnect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { agentKind, startAgent, type NodeAgent } from '../faults/agent.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { callBerth, type ClientCert } from '../harness/kubelet-api-client.ts';
import { fetchLocal } from '../harness/net.ts';

const IDLE = 800;
const HALF_TLS = 400;
const SLOW = 400;
const CHURN_PARALLEL = 50;
/** The first bytes of a TLS 1.2 ClientHello record header and a little of its body. */
const PARTIAL_HELLO = Buffer.from('16030100c4010000c00303', 'hex');

async function openFds(pid: number): Promise<number> {
  return (await readdir(`/proc/${pid}/fd`)).length;
}

/** Opens `n` connections with `open`, at most 100 in flight, resolving once all connected. */
async function openMany(n: number, open: () => Socket, sink: Set<Socket>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      next += 1;
      const s = open();
      sink.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sink.delete(s));
      await new Promise<void>((resolve) => {
        s.once('connect', resolve);
        s.once('secureConnect', resolve);
        s.once('close', resolve);
      });
    }
  };
  await Promise.all(Array.from({ length: 100 }, worker));
}

describe('kubelet API under a connection flood', () => {
  let cluster: Cluster;
  let agent: NodeAgent;
  let port = 0;
  let healthzPort = 0;
  let ca: Buffer;
  let admin: ClientCert;
  const held = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let churning = false;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    agent = await startAgent(cluster, agentKind());
    port = agent.port;
    healthzPort = agent.healthzPort;
    ca = await readFile(cluster.pki.ca.cert);
    admin = {
      cert: await readFile(cluster.pki.kubeletClient.cert),
      key: await readFile(cluster.pki.kubeletClient.key),
    };
    await applyJson(cluster, busyboxPod(cluster, 'before', agent.nodeName));
    await waitForPod(cluster, 'default', 'before', 'running', isRunningAndReady, 120_000);
  });

  after(async () => {
    churning = false;
    for (const t of timers) clearInterval(t);
    for (const s of held) s.destroy();
    await agent.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test(`${agentKind()} serves healthz and the API, and starts a pod, while 2000 connections hang on`, async () => {
    const pid = agent.pid();
    const baseline = await openFds(pid);
    const healthz = async (): Promise<number> =>
      (await fetchLocal(`http://127.0.0.1:${healthzPort}/healthz`, { timeoutMs: 30_000 })).status;
    assert.equal(await healthz(), 200);

    // Churn: open and reset at once, 50 at a time, until the test ends.
    churning = true;
    let churned = 0;
    const churn = async (): Promise<void> => {
      while (churning) {
        await new Promise<void>((resolve) => {
          const s = netConnect(port, '127.0.0.1');
          s.on('error', () => undefined);
          s.once('connect', () => {
            churned += 1;
            s.resetAndDestroy();
          });
          s.once('close', () => {
            resolve();
          });
        });
      }
    };
    const churners = Array.from({ length: CHURN_PARALLEL }, churn);

    await openMany(IDLE / 2, () => netConnect(port, '127.0.0.1'), held);
    await openMany(IDLE / 2, () => netConnect(healthzPort, '127.0.0.1'), held);
    await openMany(
      HALF_TLS,
      () => {
        const s = netConnect(port, '127.0.0.1');
        s.once('connect', () => s.write(PARTIAL_HELLO));
        return s;
      },
      held,
    );
    const slow = new Set<Socket>();
    await openMany(
      SLOW / 2,
      () =>
        tlsConnect({
          host: '127.0.0.1',
          port,
          rejectUnauthorized: false,
          ALPNProtocols: ['http/1.1'],
        }),
      slow,
    );
    await openMany(SLOW / 2, () => netConnect(healthzPort, '127.0.0.1'), slow);
    for (const s of slow) {
      held.add(s);
      s.write('GET /pods HTTP/1.1\r\nHost: x\r\n');
    }
    let line = 0;
    const trickle = setInterval(() => {
      line += 1;
      for (const s of slow) if (!s.destroyed) s.write(`X-Slow-${line}: ${'a'.repeat(10)}\r\n`);
    }, 3_000);
    timers.add(trickle);
    const flood = await openFds(pid);

    // While all of it hangs on: healthz, the API as the API server, and a new pod.
    assert.equal(await healthz(), 200);
    const pods = await callBerth(port, ca, '/pods', admin);
    assert.equal(pods.status, 200, pods.body);
    await applyJson(cluster, busyboxPod(cluster, 'during', agent.nodeName));
    await waitForPod(cluster, 'default', 'during', 'running', isRunningAndReady, 120_000);
    assert.equal(await healthz(), 200);
    assert.equal((await callBerth(port, ca, '/healthz', admin)).status, 200);

    clearInterval(trickle);
    churning = false;
    await Promise.all(churners);
    const stillHeld = held.size;
    for (const s of held) s.destroy();
    // The descriptors come back once the clients are gone.
    const settled = await eventually(`${agent.kind} closes the flood connections`, async () => {
      const n = await openFds(pid);
      return n <= baseline + 20 ? n : undefined;
    });
    process.stdout.write(
      `flood: ${IDLE} idle, ${HALF_TLS} half-open TLS, ${SLOW} slowloris, ${churned} churned; ` +
        `${stillHeld} still held at the end; ${agent.kind} fds ${baseline} -> ${flood} -> ${settled}\n`,
    );
    assert.equal(await healthz(), 200);
    assert.equal((await callBerth(port, ca, '/pods', admin)).status, 200);
  });
});
