import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Server as GrpcServer, ServerCredentials, status } from '@grpc/grpc-js';
import { MemoryLogger } from '../util/logger.ts';
import { RegistrationService, type RegistrationServer } from './gen/pluginregistration/v1/api.ts';
import { GrpcRegistrationClient } from './registration-client.ts';
import { FsSocketSource } from './socket-source.ts';

function listen(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(path, () => {
      resolve(s);
    });
  });
}

function close(s: Server): Promise<void> {
  return new Promise((resolve) => {
    s.close(() => {
      resolve();
    });
  });
}

describe('FsSocketSource', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-plugins-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  test('creates the directory 0750 and finds sockets, also in subdirectories', async () => {
    const dir = join(root, 'plugins_registry');
    const source = new FsSocketSource(dir, new MemoryLogger());
    const signal = new AbortController().signal;
    await source.prepare(signal);
    assert.equal((await stat(dir)).mode & 0o777, 0o750);
    await mkdir(join(dir, 'sub'));
    const a = await listen(join(dir, 'a-reg.sock'));
    const b = await listen(join(dir, 'sub', 'b-reg.sock'));
    const hidden = await listen(join(dir, '.hidden.sock'));
    await writeFile(join(dir, 'not-a-socket'), 'x');
    const first = await source.scan(signal);
    assert.deepEqual([...first.keys()].sort(), [
      join(dir, 'a-reg.sock'),
      join(dir, 'sub', 'b-reg.sock'),
    ]);
    // A recreated socket has a new identity.
    await close(a);
    assert.equal((await source.scan(signal)).has(join(dir, 'a-reg.sock')), false);
    const a2 = await listen(join(dir, 'a-reg.sock'));
    const second = await source.scan(signal);
    assert.notEqual(second.get(join(dir, 'a-reg.sock')), first.get(join(dir, 'a-reg.sock')));
    assert.equal(
      second.get(join(dir, 'sub', 'b-reg.sock')),
      first.get(join(dir, 'sub', 'b-reg.sock')),
    );
    await Promise.all([close(a2), close(b), close(hidden)]);
  });

  test('the watch reports a socket created in the tree', async () => {
    const dir = join(root, 'watched');
    const source = new FsSocketSource(dir, new MemoryLogger());
    const ac = new AbortController();
    await source.prepare(ac.signal);
    const changed = new Promise<void>((resolve) => {
      source.watch(resolve, ac.signal);
    });
    const s = await listen(join(dir, 'x.sock'));
    await changed;
    ac.abort();
    await close(s);
  });
});

describe('GrpcRegistrationClient', () => {
  let root: string;
  let server: GrpcServer;
  const notified: { registered: boolean; error: string }[] = [];
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-reg-'));
    server = new GrpcServer();
    const impl: RegistrationServer = {
      getInfo: (_call, cb) => {
        cb(null, {
          type: 'CSIPlugin',
          name: 'a.csi',
          endpoint: '/csi/a.sock',
          supportedVersions: ['1.0.0'],
        });
      },
      notifyRegistrationStatus: (call, cb) => {
        notified.push({ registered: call.request.pluginRegistered, error: call.request.error });
        if (call.request.error === 'fail') cb({ code: status.INTERNAL, details: 'no' });
        else cb(null, {});
      },
    };
    server.addService(RegistrationService, impl);
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(
        `unix://${join(root, 'reg.sock')}`,
        ServerCredentials.createInsecure(),
        (err) => {
          if (err === null) resolve();
          else reject(err);
        },
      );
    });
  });
  after(async () => {
    server.forceShutdown();
    await rm(root, { recursive: true, force: true });
  });

  test('GetInfo and NotifyRegistrationStatus over the socket', async () => {
    const client = new GrpcRegistrationClient(join(root, 'reg.sock'));
    const signal = new AbortController().signal;
    assert.deepEqual(await client.getInfo(signal), {
      type: 'CSIPlugin',
      name: 'a.csi',
      endpoint: '/csi/a.sock',
      supportedVersions: ['1.0.0'],
    });
    await client.notifyRegistrationStatus(false, 'bad version', signal);
    await assert.rejects(client.notifyRegistrationStatus(false, 'fail', signal), /INTERNAL: no/);
    assert.deepEqual(notified, [
      { registered: false, error: 'bad version' },
      { registered: false, error: 'fail' },
    ]);
    client.close();
  });

  test('a socket nobody serves fails GetInfo quickly', async () => {
    const client = new GrpcRegistrationClient(join(root, 'nobody.sock'));
    await assert.rejects(client.getInfo(new AbortController().signal), /UNAVAILABLE/);
    client.close();
  });
});
