/**
 * The real manager, socket source and registration client together, on a temporary
 * plugins_registry/ with grpc-js registration servers: a socket in a subdirectory
 * registers, a removed one deregisters, one offering an unsupported version is told why.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { systemClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { FakePluginHandler } from './fake.ts';
import { RegistrationService, type RegistrationServer } from './gen/pluginregistration/v1/api.ts';
import { PluginManagerImpl } from './manager.ts';
import { GrpcRegistrationClient } from './registration-client.ts';
import { FsSocketSource } from './socket-source.ts';
import { CSI_PLUGIN } from './types.ts';

const root = await mkdtemp(join(tmpdir(), 'berth-pm-'));
after(() => rm(root, { recursive: true, force: true }));

async function serve(
  path: string,
  name: string,
  notified: { registered: boolean; error: string }[],
): Promise<Server> {
  const server = new Server();
  const impl: RegistrationServer = {
    getInfo: (_call, cb) => {
      cb(null, {
        type: CSI_PLUGIN,
        name,
        endpoint: `/csi/${name}.sock`,
        supportedVersions: ['1.0.0'],
      });
    },
    notifyRegistrationStatus: (call, cb) => {
      notified.push({ registered: call.request.pluginRegistered, error: call.request.error });
      cb(null, {});
    },
  };
  server.addService(RegistrationService, impl);
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${path}`, ServerCredentials.createInsecure(), (err) => {
      if (err === null) resolve();
      else reject(err);
    });
  });
  return server;
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('sockets under plugins_registry/ register, deregister and are told refusals', async () => {
  const dir = join(root, 'plugins_registry');
  const logger = new MemoryLogger();
  const handler = new FakePluginHandler();
  const pm = new PluginManagerImpl({
    source: new FsSocketSource(dir, logger),
    handlers: new Map([[CSI_PLUGIN, handler]]),
    newClient: (p) => new GrpcRegistrationClient(p),
    clock: systemClock,
    logger,
    rescanMs: 60_000,
  });
  await pm.start(new AbortController().signal);
  const okNotes: { registered: boolean; error: string }[] = [];
  await mkdir(join(dir, 'sub'), { recursive: true });
  const ok = await serve(join(dir, 'sub', 'ok-reg.sock'), 'ok.csi', okNotes);
  // Found by the watch, not the (one-minute) rescan.
  await until('ok.csi registered', () => pm.registered().length === 1);
  assert.deepEqual(okNotes, [{ registered: true, error: '' }]);
  handler.failValidate = new Error('no 1.x version');
  const badNotes: { registered: boolean; error: string }[] = [];
  const bad = await serve(join(dir, 'bad-reg.sock'), 'bad.csi', badNotes);
  await until('bad.csi refused', () => badNotes.length > 0);
  assert.deepEqual(badNotes[0], {
    registered: false,
    error: 'RegisterPlugin error -- plugin validation failed with err: no 1.x version',
  });
  ok.forceShutdown();
  await rm(join(dir, 'sub', 'ok-reg.sock'), { force: true });
  await until('ok.csi deregistered', () => handler.ops().includes('deregister ok.csi'));
  assert.deepEqual(pm.registered(), []);
  bad.forceShutdown();
  await pm.stop();
});
