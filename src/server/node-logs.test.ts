/**
 * /logs/ (node log files) and /run through a real KubeletServer on loopback
 * (self-signed certificate from openssl, anonymous user, a webhook authorizer that
 * records the subresources it is asked about).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { FakeCriClient } from '../cri/fake/index.ts';
import { CONTAINER_NAME_LABEL, POD_UID_LABEL } from '../container/labels.ts';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { recordingAuthorizer, selfSignedCertificate, testServerOptions } from './testing.ts';
import { KubeletServer } from './server.ts';

interface Reply {
  readonly status: number;
  readonly body: string;
}

function call(port: number, path: string, method = 'GET'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method, rejectUnauthorized: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const POD: Pod = {
  metadata: { name: 'web', namespace: 'ns', uid: 'uid-1' },
  spec: { containers: [{ name: 'app', image: 'registry.test/app:1' }] },
};

describe('kubelet API /logs/ and /run', () => {
  let dir = '';
  let varLog = '';
  let server: KubeletServer;
  let port = 0;
  const asked: string[] = [];
  const allowed = new Set(['log', 'proxy']);
  const fake = new FakeCriClient();
  const execs: string[][] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-nodelogs-'));
    varLog = join(dir, 'var-log');
    await mkdir(join(varLog, 'sub dir'), { recursive: true });
    await writeFile(join(varLog, 'syslog'), 'booted\n');
    await writeFile(join(varLog, 'sub dir', 'a<b>.log'), 'nested\n');
    await writeFile(join(dir, 'secret'), 'host secret\n');
    // A link planted in a log directory, leading out of it, and one staying inside.
    await symlink(join(dir, 'secret'), join(varLog, 'escape'));
    await symlink(dir, join(varLog, 'escape-dir'));
    await symlink(join(varLog, 'syslog'), join(varLog, 'inside'));
    await promisify(execFile)('mkfifo', [join(varLog, 'fifo')]);
    await selfSignedCertificate(dir);
    fake.addImage('registry.test/app:1', { preloaded: true });
    const config = cri.PodSandboxConfig.fromPartial({
      metadata: { name: 'web', uid: 'uid-1', namespace: 'ns' },
    });
    const { podSandboxId } = await fake.runtime.runPodSandbox({ config });
    const { containerId } = await fake.runtime.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: {
        metadata: { name: 'app' },
        image: { image: 'registry.test/app:1' },
        labels: { [POD_UID_LABEL]: 'uid-1', [CONTAINER_NAME_LABEL]: 'app' },
      },
    });
    await fake.runtime.startContainer({ containerId });
    fake.onExec((_c, cmd) => {
      execs.push([...cmd]);
      if (cmd[0] === 'false') return { exitCode: 1, stderr: 'nope\n' };
      return { stdout: `out:${cmd.join(',')}\n`, stderr: 'err\n' };
    });
    const kube = recordingAuthorizer(asked, allowed);
    server = new KubeletServer(testServerOptions(dir, { nodeLogsDir: varLog }), {
      kube,
      cri: fake,
      clock: new FakeClock(),
      logger: new MemoryLogger(),
      pods: () => new Map([['uid-1', POD]]),
    });
    await server.start();
    port = server.port;
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('/logs/ lists the directory and serves files, authorized as nodes/log', async () => {
    asked.length = 0;
    const list = await call(port, '/logs/');
    assert.equal(list.status, 200);
    assert.match(list.body, /<a href="\/logs\/syslog">syslog<\/a>/);
    assert.match(list.body, /<a href="\/logs\/sub%20dir">sub dir\/<\/a>/);
    assert.deepEqual(asked, ['log']);
    const nested = await call(port, '/logs/sub%20dir/');
    assert.match(nested.body, /href="\/logs\/sub%20dir\/a%3Cb%3E.log">a&#60;b&#62;.log</);
    assert.deepEqual(await call(port, '/logs/syslog'), { status: 200, body: 'booted\n' });
    assert.equal((await call(port, '/logs/sub%20dir/a%3Cb%3E.log')).body, 'nested\n');
    assert.equal((await call(port, '/logs/inside')).body, 'booted\n');
    assert.equal((await call(port, '/logs/syslog', 'HEAD')).status, 200);
  });

  test('/logs/ refuses escapes, odd files, queries and writes with a 4xx', async () => {
    for (const [path, status] of [
      ['/logs/escape', 403],
      ['/logs/escape-dir/secret', 403],
      ['/logs/../secret', 400],
      ['/logs/%2e%2e/secret', 400],
      ['/logs/sub%2Fdir', 400],
      ['/logs/fifo', 403],
      ['/logs/missing', 404],
      ['/logs/?query=kubelet', 400],
      ['/logs/?tailLines=5&query=x', 400],
    ] as const) {
      const r = await call(port, path);
      assert.equal(r.status, status, `${path}: ${r.body}`);
      assert.doesNotMatch(r.body, /host secret/);
    }
    // The query mode is off by default (enableSystemLogQuery); node-log-query.test.ts has it on.
    assert.match((await call(port, '/logs/?query=kubelet')).body, /enableSystemLogQuery is off/);
    assert.equal((await call(port, '/logs/syslog', 'POST')).status, 405);
  });

  test('/logs/ is denied without the log subresource', async () => {
    allowed.delete('log');
    try {
      assert.equal((await call(port, '/logs/syslog')).status, 403);
    } finally {
      allowed.add('log');
    }
  });

  test('/run answers ExecSync output, authorized as nodes/proxy create', async () => {
    asked.length = 0;
    execs.length = 0;
    const r = await call(port, '/run/ns/web/app?cmd=echo%20hi%20there', 'POST');
    assert.deepEqual(r, { status: 200, body: 'out:echo,hi,there\nerr\n' });
    assert.deepEqual(execs, [['echo', 'hi', 'there']]);
    assert.deepEqual(asked, ['proxy']);
    assert.equal((await call(port, '/run/ns/web/uid-1/app?cmd=ls', 'POST')).status, 200);
  });

  test('/run errors: method, pod, container, uid, cmd and exit code', async () => {
    for (const [path, method, status] of [
      ['/run/ns/web/app?cmd=ls', 'GET', 405],
      ['/run/ns/nope/app?cmd=ls', 'POST', 404],
      ['/run/ns/web/other?cmd=ls', 'POST', 404],
      ['/run/ns/web/wrong-uid/app?cmd=ls', 'POST', 404],
      ['/run/ns/web/app', 'POST', 400],
      ['/run/ns/web', 'POST', 400],
    ] as const) {
      assert.equal((await call(port, path, method)).status, status, path);
    }
    const failed = await call(port, '/run/ns/web/app?cmd=false', 'POST');
    assert.equal(failed.status, 500);
    assert.match(failed.body, /exited with 1: nope/);
  });
});
