/**
 * berth's kubelet API (issue #7) through the real API server and kubectl: logs, exec,
 * port-forward, and the authentication/authorization matrix straight against :10250.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, readFile, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { run } from '../harness/exec.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getPod,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { fetchLocal, freePort } from '../harness/net.ts';
import { callBerth, openUpgrade, websocketHeaders } from '../harness/kubelet-api-client.ts';
import { makeCa, makeLeaf, type CertPair } from '../harness/pki.ts';

describe('kubelet API on containerd2', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let port: number;
  let ca: Buffer;
  const load = async (pair: CertPair): Promise<{ cert: Buffer; key: Buffer }> => ({
    cert: await readFile(pair.cert),
    key: await readFile(pair.key),
  });
  const kubectl = (args: readonly string[], input?: string, okCodes?: readonly number[]) =>
    run(cluster.bin.kubectl, ['--kubeconfig', cluster.adminKubeconfig, ...args], {
      ...(input !== undefined && { input }),
      ...(okCodes !== undefined && { okCodes }),
      timeoutMs: 60_000,
    });

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    const config = await readFile(berth.configFile, 'utf8');
    port = Number(/^port: (\d+)$/m.exec(config)?.[1]);
    ca = await readFile(cluster.pki.ca.cert);
    const node = berth.nodeName;
    await Promise.all([
      applyJson(
        cluster,
        busyboxPod(cluster, 'logs', node, {
          command: [
            'sh',
            '-c',
            // The long line is split by the runtime into partial (P) records.
            'echo one; echo two; echo three; head -c 40000 /dev/zero | tr "\\0" a; echo; sleep 3600',
          ],
        }),
      ),
      applyJson(
        cluster,
        busyboxPod(cluster, 'crash', node, { command: ['sh', '-c', 'echo started; exit 3'] }),
      ),
      applyJson(
        cluster,
        busyboxPod(cluster, 'web', node, {
          command: [
            'sh',
            '-c',
            'echo hello-from-httpd > /tmp/index.html; busybox httpd -f -p 8080 -h /tmp',
          ],
        }),
      ),
      applyJson(cluster, {
        ...busyboxPod(cluster, 'attach', node, { restartPolicy: 'Never' }),
        spec: {
          nodeName: node,
          automountServiceAccountToken: false,
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 5,
          containers: [
            {
              name: 'main',
              image: cluster.images.busyboxLocal,
              imagePullPolicy: 'IfNotPresent',
              command: ['sh', '-c', 'while read l; do echo got $l; done; echo bye'],
              stdin: true,
              stdinOnce: true,
            },
          ],
        },
      }),
    ]);
    await applyJson(
      cluster,
      busyboxPod(cluster, 'victim', node, { command: ['sh', '-c', 'echo mine; sleep 3600'] }),
    );
    await Promise.all(
      ['logs', 'web', 'attach', 'victim'].map((n) =>
        waitForPod(cluster, 'default', n, 'running', isRunningAndReady, 90_000),
      ),
    );
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('kubectl logs: whole log, --tail counts records, --limit-bytes', async () => {
    const long = 'a'.repeat(40000);
    const all = await eventually('logs', async () => {
      const { stdout } = await kubectl(['logs', 'logs']);
      return stdout.includes(long) ? stdout : undefined;
    });
    assert.equal(all, `one\ntwo\nthree\n${long}\n`);
    // containerd cuts the long line into records of 16 KiB (P, P, F); --tail counts
    // records, as upstream's does, so two of them are the line's last 40000 - 16384 bytes.
    assert.equal((await kubectl(['logs', 'logs', '--tail', '2'])).stdout, `${'a'.repeat(23616)}\n`);
    assert.equal((await kubectl(['logs', 'logs', '--tail', '4'])).stdout, `three\n${long}\n`);
    assert.equal((await kubectl(['logs', 'logs', '--tail', '0'])).stdout, '');
    assert.equal((await kubectl(['logs', 'logs', '--limit-bytes', '6'])).stdout, 'one\ntw');
  });

  test('kubectl logs --timestamps prefixes RFC3339 times; --since-time in the future is empty', async () => {
    // The last five records: two, three and the long line's three; one stamp per line,
    // with nine fraction digits as upstream prints them.
    const { stdout } = await kubectl(['logs', 'logs', '--timestamps', '--tail', '5']);
    const lines = stdout.trimEnd().split('\n');
    assert.equal(lines.length, 3);
    for (const line of lines) assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z /);
    assert.match(lines[0] ?? '', / two$/);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    assert.equal((await kubectl(['logs', 'logs', `--since-time=${future}`])).stdout, '');
  });

  test('kubectl logs --previous shows the crashed container', async () => {
    await waitForPod(
      cluster,
      'default',
      'crash',
      'restarted',
      (p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1,
      90_000,
    );
    const { stdout } = await kubectl(['logs', 'crash', '--previous']);
    assert.equal(stdout, 'started\n');
  });

  test('output without a final newline (echo -n): kubectl logs and FallbackToLogsOnError show it', async () => {
    const node = berth.nodeName;
    const container = (name: string, script: string, policy?: string) => ({
      name,
      image: cluster.images.busyboxLocal,
      imagePullPolicy: 'IfNotPresent',
      command: ['sh', '-c', script],
      ...(policy !== undefined && { terminationMessagePolicy: policy }),
    });
    await Promise.all([
      applyJson(
        cluster,
        busyboxPod(cluster, 'echo-n', node, {
          restartPolicy: 'Never',
          command: ['sh', '-c', 'echo -n DONE'],
        }),
      ),
      applyJson(
        cluster,
        busyboxPod(cluster, 'fallback', node, {
          restartPolicy: 'Never',
          extraSpec: {
            containers: [
              container('silent', 'echo -n DONE; exit 1', 'FallbackToLogsOnError'),
              container(
                'lines',
                'echo first; echo -n sec; echo -n ond; exit 2',
                'FallbackToLogsOnError',
              ),
              container('file', 'echo -n DONE; exit 1'),
            ],
          },
        }),
      ),
    ]);
    await waitForPod(
      cluster,
      'default',
      'echo-n',
      'succeeded',
      (p) => p.status?.phase === 'Succeeded',
    );
    // The runtime writes "echo -n"'s output as a partial (P) record that nothing follows.
    assert.equal((await kubectl(['logs', 'echo-n'])).stdout, 'DONE');
    assert.equal((await kubectl(['logs', 'echo-n', '--tail', '1'])).stdout, 'DONE');
    assert.match(
      (await kubectl(['logs', 'echo-n', '--timestamps'])).stdout,
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z DONE$/,
    );
    const pod = await waitForPod(cluster, 'default', 'fallback', 'failed', (p) =>
      (p.status?.containerStatuses ?? []).every((c) => c.state?.terminated !== undefined),
    );
    const messages = Object.fromEntries(
      (pod.status?.containerStatuses ?? []).map((c) => [c.name, c.state?.terminated?.message]),
    );
    assert.deepEqual(messages, { silent: 'DONE', lines: 'first\nsecond', file: undefined });
  });

  test('kubectl logs -f streams until the container exits', async () => {
    await applyJson(
      cluster,
      busyboxPod(cluster, 'ticker', berth.nodeName, {
        restartPolicy: 'Never',
        command: ['sh', '-c', 'for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done'],
      }),
    );
    await waitForPod(cluster, 'default', 'ticker', 'running', (p) => p.status?.phase !== 'Pending');
    const { stdout } = await kubectl(['logs', '-f', 'ticker']);
    assert.equal(stdout, [1, 2, 3, 4, 5, 6].map((i) => `tick ${i}\n`).join(''));
  });

  test('kubectl attach with stdin', async () => {
    const { stdout } = await kubectl(['attach', '-i', 'attach'], 'hello\n');
    assert.match(stdout, /got hello/);
  });

  test('kubectl logs names an unknown container clearly', async () => {
    const r = await kubectl(['logs', 'logs', '-c', 'nope'], undefined, [1]);
    assert.match(r.stderr, /nope/);
  });

  test('kubectl exec with stdin piped propagates output and exit code', async () => {
    const ok = await kubectl(
      ['exec', '-i', 'logs', '--', 'sh', '-c', 'cat; echo err >&2'],
      'piped-in\n',
    );
    assert.equal(ok.stdout, 'piped-in\n');
    assert.match(ok.stderr, /err/);
    const failed = await kubectl(['exec', 'logs', '--', 'sh', '-c', 'exit 7'], undefined, [7]);
    assert.equal(failed.exitCode, 7);
  });

  test('kubectl exec -t through a pseudo-terminal gets a TTY and its exit code', async () => {
    // script(1) gives kubectl a pty, as an interactive user would have.
    const line = [
      cluster.bin.kubectl,
      '--kubeconfig',
      cluster.adminKubeconfig,
      'exec',
      '-it',
      'logs',
      '--',
      'sh',
      '-c',
      '"tty; exit 5"',
    ].join(' ');
    const r = await run('script', ['-qec', line, '/dev/null'], { okCodes: [5], timeoutMs: 60_000 });
    assert.equal(r.exitCode, 5);
    assert.match(r.stdout, /\/dev\/pts\/\d+/);
  });

  test('kubectl cp both ways', async () => {
    const dir = join(cluster.root, 'cp-test');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'in.txt'), 'copied through exec\n');
    await kubectl(['cp', join(dir, 'in.txt'), 'default/logs:/tmp/in.txt']);
    assert.equal(
      (await kubectl(['exec', 'logs', '--', 'cat', '/tmp/in.txt'])).stdout,
      'copied through exec\n',
    );
    await kubectl(['cp', 'default/logs:/tmp/in.txt', join(dir, 'out.txt')]);
    assert.equal(await readFile(join(dir, 'out.txt'), 'utf8'), 'copied through exec\n');
  });

  test('the API server multiplexes kubectl logs -f streams over one HTTP/2 connection', async () => {
    // The API server's connections to berth's port, seen from its side of them.
    const connections = async (): Promise<number> => {
      const filter = ['(', 'dport', '=', `:${String(port)}`, ')'];
      const { stdout } = await run('ss', ['-Htnp', 'state', 'established', ...filter]);
      return stdout.split('\n').filter((l) => l.includes('"kube-apiserver"')).length;
    };
    // One request first, so the followers find the connection rather than dial together.
    await kubectl(['logs', '--tail', '1', 'logs']);
    const followers = [1, 2, 3].map(() =>
      spawn(
        cluster.bin.kubectl,
        ['--kubeconfig', cluster.adminKubeconfig, 'logs', '-f', '--tail', '1', 'logs'],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      ),
    );
    const printed = new Set<number>();
    followers.forEach((c, i) => c.stdout.once('data', () => printed.add(i)));
    try {
      // Each has its line: three follows open at once. Over HTTP/1.1 each would hold a
      // connection of its own (and a cancelled one closes it); over HTTP/2 they are
      // streams of one. Connections of earlier tests' streams may take a moment to go.
      await eventually('three follows printing', () =>
        Promise.resolve(printed.size === followers.length ? true : undefined),
      );
      await eventually(
        'one connection',
        async () => ((await connections()) === 1 ? true : undefined),
        10_000,
      );
      assert.ok(followers.every((c) => c.exitCode === null));
    } finally {
      for (const c of followers) c.kill('SIGTERM');
    }
  });

  test('kubectl port-forward then an HTTP GET through it', async () => {
    const local = await freePort();
    const child = spawn(
      cluster.bin.kubectl,
      [
        '--kubeconfig',
        cluster.adminKubeconfig,
        'port-forward',
        '--address',
        '127.0.0.1',
        'pod/web',
        `${local}:8080`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', () => undefined);
    try {
      await eventually(
        'port-forward ready',
        () => Promise.resolve(output.includes('Forwarding from') ? true : undefined),
        30_000,
      );
      const res = await fetchLocal(`http://127.0.0.1:${local}/index.html`);
      assert.equal(res.status, 200, output);
      assert.match(res.body.toString(), /hello-from-httpd/);
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
    }
  });

  test('auth matrix: 401 / 403 / 200 and bad paths', async () => {
    const dir = join(cluster.root, 'test-pki');
    await mkdir(dir, { recursive: true });
    const otherCa = await makeCa(dir, 'other-ca', 'other-ca');
    const foreign = await load(
      await makeLeaf(dir, otherCa, {
        name: 'foreign',
        subject: '/CN=admin/O=system:masters',
        usage: 'clientAuth',
      }),
    );
    const nobody = await load(
      await makeLeaf(dir, cluster.pki.ca, {
        name: 'nobody',
        subject: '/CN=nobody',
        usage: 'clientAuth',
      }),
    );
    const reader = await load(
      await makeLeaf(dir, cluster.pki.ca, {
        name: 'reader',
        subject: '/CN=proxy-reader',
        usage: 'clientAuth',
      }),
    );
    await applyJson(cluster, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'nodes-proxy-get' },
      rules: [{ apiGroups: [''], resources: ['nodes/proxy'], verbs: ['get'] }],
    });
    await applyJson(cluster, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'proxy-reader' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'nodes-proxy-get',
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'proxy-reader' }],
    });
    const admin = await load(cluster.pki.kubeletClient);
    const routes = ['/pods', '/runningpods/', '/healthz', '/containerLogs/default/logs/main'];
    for (const route of routes) {
      assert.equal((await callBerth(port, ca, route)).status, 401, `${route} without credentials`);
      assert.equal((await callBerth(port, ca, route, foreign)).status, 401, `${route} foreign CA`);
      assert.equal((await callBerth(port, ca, route, nobody)).status, 403, `${route} without RBAC`);
      const ok = await callBerth(port, ca, route, admin);
      assert.equal(ok.status, 200, `${route} as the API server: ${ok.body}`);
    }
    const pods = JSON.parse((await callBerth(port, ca, '/pods', admin)).body) as {
      kind: string;
      items: { metadata: { name: string } }[];
    };
    assert.equal(pods.kind, 'PodList');
    assert.ok(pods.items.some((p) => p.metadata.name === 'logs'));
    const runningList = JSON.parse((await callBerth(port, ca, '/runningpods/', admin)).body) as {
      items: { metadata: { name: string }; spec: { containers: { name: string }[] } }[];
    };
    assert.deepEqual(
      runningList.items.find((p) => p.metadata.name === 'logs')?.spec.containers.map((c) => c.name),
      ['main'],
    );
    // nodes/proxy get: reads pods through the proxy fallback, but a WebSocket exec is create.
    await eventually('RBAC for proxy-reader', async () =>
      (await callBerth(port, ca, '/pods', reader)).status === 200 ? true : undefined,
    );
    const ws = await callBerth(
      port,
      ca,
      '/exec/default/logs/main?command=true&stdout=1',
      reader,
      websocketHeaders(['v4.channel.k8s.io']),
    );
    assert.equal(ws.status, 403, ws.body);
    const anonymousWs = await callBerth(
      port,
      ca,
      '/exec/default/logs/main?command=true&stdout=1',
      undefined,
      websocketHeaders([]),
    );
    assert.equal(anonymousWs.status, 401, anonymousWs.body);
    for (const bad of [
      '/containerLogs/default/../../etc/passwd',
      '/containerLogs/default/logs/..%2f..%2fetc',
      '/containerLogs/default/logs/main?tailLines=x',
      '/containerLogs/default/logs/main?sinceSeconds=-1',
    ]) {
      const r = await callBerth(port, ca, bad, admin);
      assert.ok(r.status >= 400 && r.status < 500, `${bad}: ${r.status} ${r.body}`);
      assert.doesNotMatch(r.body, /root:/);
    }
    const unknown = await callBerth(port, ca, '/containerLogs/default/nope/main', admin);
    assert.equal(unknown.status, 404);
    assert.match(unknown.body, /pod "default\/nope" not found/);
    // Bearer tokens go through TokenReview: a bad one is 401, a service account without
    // RBAC on nodes is 403.
    await kubectl(['create', 'serviceaccount', 'no-rights']);
    const token = (await kubectl(['create', 'token', 'no-rights'])).stdout.trim();
    const bearer = (t: string): Record<string, string> => ({ Authorization: `Bearer ${t}` });
    assert.equal((await callBerth(port, ca, '/pods', undefined, bearer('garbage'))).status, 401);
    const denied = await callBerth(port, ca, '/pods', undefined, bearer(token));
    assert.equal(denied.status, 403, denied.body);
    assert.match(denied.body, /system:serviceaccount:default:no-rights/);
    const upgradePods = await callBerth(port, ca, '/pods', admin, {
      Connection: 'Upgrade',
      Upgrade: 'websocket',
    });
    assert.equal(upgradePods.status, 400);
  });

  test('healthz answers ok on its loopback port', async () => {
    const config = await readFile(berth.configFile, 'utf8');
    const healthz = Number(/^healthzPort: (\d+)$/m.exec(config)?.[1]);
    const res = await fetchLocal(`http://127.0.0.1:${healthz}/healthz`);
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), 'ok');
  });

  test('a log file replaced by a symlink is not followed', async () => {
    const pod = await getPod(cluster, 'default', 'victim');
    const uid = pod?.metadata?.uid ?? '';
    const file = join(berth.dir, 'pod-logs', `default_victim_${uid}`, 'main', '0.log');
    await eventually('victim log', async () =>
      (await readFile(file, 'utf8')).includes('mine') ? true : undefined,
    );
    await rename(file, `${file}.moved`);
    await symlink('/etc/passwd', file);
    const admin = await load(cluster.pki.kubeletClient);
    const r = await callBerth(port, ca, '/containerLogs/default/victim/main', admin);
    assert.equal(r.status, 404, r.body);
    assert.doesNotMatch(r.body, /root:/);
  });

  test('a WebSocket exec straight to berth is proxied to the runtime (101)', async () => {
    const admin = await load(cluster.pki.kubeletClient);
    const stream = openUpgrade(
      port,
      ca,
      '/exec/default/logs/main?command=echo&command=hi-ws&stdout=1&stderr=1',
      admin,
      websocketHeaders(['v4.channel.k8s.io']),
    );
    await eventually('the exec output', () =>
      Promise.resolve(stream.received().includes('hi-ws') ? true : undefined),
    );
    stream.socket.destroy();
    const data = stream.received();
    assert.match(data, /^HTTP\/1\.1 101/);
    assert.match(data, /sec-websocket-protocol: v4\.channel\.k8s\.io/i);
    assert.match(data, /hi-ws/);
  });

  test('a v5 WebSocket exec is served by berth: channels out, the status on channel 3', async () => {
    const admin = await load(cluster.pki.kubeletClient);
    const stream = openUpgrade(
      port,
      ca,
      '/exec/default/logs/main?command=sh&command=-c&command=echo+hi-v5%3B+exit+4&stdout=1&stderr=1',
      admin,
      websocketHeaders(['v5.channel.k8s.io']),
    );
    await eventually('the exec status', () =>
      Promise.resolve(stream.received().includes('"status"') ? true : undefined),
    );
    stream.socket.destroy();
    const data = stream.received();
    assert.match(data, /^HTTP\/1\.1 101/);
    assert.match(data, /sec-websocket-protocol: v5\.channel\.k8s\.io/i);
    // Unmasked binary frames: 0x82, the length, then the channel byte.
    assert.ok(data.includes('\x82\x07\x01hi-v5\n'), JSON.stringify(data));
    assert.match(data, /\x03\{.*"status":"Failure".*"reason":"NonZeroExitCode"/);
    assert.match(data, /"causes":\[\{"reason":"ExitCode","message":"4"\}\]/);
  });

  test('kubectl streams reach berth as WebSockets from the API server (ExtendWebSocketsToKubelet)', async () => {
    const node = JSON.parse(
      (await kubectl(['get', 'node', berth.nodeName, '-o', 'json'])).stdout,
    ) as {
      status: { declaredFeatures?: string[] };
    };
    assert.ok(node.status.declaredFeatures?.includes('ExtendWebSocketsToKubelet'));
    const proxied = async (): Promise<number> => {
      const metrics = (await kubectl(['get', '--raw', '/metrics'])).stdout;
      const line = metrics
        .split('\n')
        .find(
          (l) =>
            l.startsWith('apiserver_websocket_streaming_requests_total{') &&
            l.includes('proxy_type="proxied_to_kubelet"') &&
            l.includes('subresource="exec"'),
        );
      return line === undefined ? 0 : Number(line.split(' ').pop());
    };
    const before = await proxied();
    const r = await kubectl(['exec', 'logs', '--', 'echo', 'through-berth']);
    assert.equal(r.stdout, 'through-berth\n');
    assert.equal(await proxied(), before + 1);
  });
});
