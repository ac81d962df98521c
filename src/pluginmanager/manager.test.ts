import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { FakeClock } from '../util/clock.ts';
import { MemoryLogger } from '../util/logger.ts';
import { pluginManagerContract } from './contract.ts';
import {
  FakePluginHandler,
  FakePluginManager,
  FakeRegistrationSockets,
  FakeSocketSource,
} from './fake.ts';
import { PluginManagerImpl } from './manager.ts';
import { CSI_PLUGIN } from './types.ts';

/** Lets queued promise callbacks and immediates run. */
async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
}

function csiInfo(name: string, versions = ['1.0.0']) {
  return {
    type: CSI_PLUGIN,
    name,
    endpoint: `/var/lib/kubelet/plugins/${name}/csi.sock`,
    supportedVersions: versions,
  };
}

interface World {
  clock: FakeClock;
  source: FakeSocketSource;
  sockets: FakeRegistrationSockets;
  handler: FakePluginHandler;
  logger: MemoryLogger;
  pm: PluginManagerImpl;
}

function world(): World {
  const clock = new FakeClock();
  const source = new FakeSocketSource();
  const sockets = new FakeRegistrationSockets();
  const handler = new FakePluginHandler();
  const logger = new MemoryLogger();
  const pm = new PluginManagerImpl({
    source,
    handlers: new Map([[CSI_PLUGIN, handler]]),
    newClient: sockets.newClient,
    clock,
    logger,
    rescanMs: 2_000,
    handlerTimeoutMs: 10_000,
  });
  return { clock, source, sockets, handler, logger, pm };
}

pluginManagerContract('PluginManagerImpl', () => world().pm);
pluginManagerContract('FakePluginManager', () => new FakePluginManager());

describe('PluginManagerImpl', () => {
  let w: World;
  beforeEach(async () => {
    w = world();
    await w.pm.start(new AbortController().signal);
    await settle();
  });
  afterEach(async () => {
    await w.pm.stop();
  });

  test('a new CSI socket: GetInfo, validate, register, then NotifyRegistrationStatus(true)', async () => {
    assert.equal(w.source.prepared, true);
    w.sockets.scripts.set('/reg/a.sock', { info: csiInfo('a.csi') });
    w.source.add('/reg/a.sock');
    await settle();
    assert.deepEqual(w.handler.ops(), ['validate a.csi', 'register a.csi']);
    assert.equal(w.handler.calls[1]?.endpoint, '/var/lib/kubelet/plugins/a.csi/csi.sock');
    assert.deepEqual(w.sockets.notifications, [
      { socketPath: '/reg/a.sock', registered: true, error: '' },
    ]);
    assert.deepEqual(w.pm.registered(), [
      {
        socketPath: '/reg/a.sock',
        type: CSI_PLUGIN,
        name: 'a.csi',
        endpoint: '/var/lib/kubelet/plugins/a.csi/csi.sock',
      },
    ]);
    assert.equal(w.sockets.closed, w.sockets.opened, 'every registration connection is closed');
    // Nothing more happens on later rescans.
    await w.clock.advance(10_000);
    await settle();
    assert.equal(w.handler.calls.length, 2);
  });

  test('an empty endpoint means the registration socket itself', async () => {
    w.sockets.scripts.set('/reg/a.sock', { info: { ...csiInfo('a.csi'), endpoint: '' } });
    w.source.add('/reg/a.sock');
    await settle();
    assert.equal(w.pm.registered()[0]?.endpoint, '/reg/a.sock');
  });

  test("a DevicePlugin or DRAPlugin socket is refused with upstream's error and retried with back-off", async () => {
    w.sockets.scripts.set('/reg/dp.sock', {
      info: { ...csiInfo('nvidia.com/gpu'), type: 'DevicePlugin' },
    });
    w.sockets.scripts.set('/reg/dra.sock', {
      info: { ...csiInfo('gpu.example.com'), type: 'DRAPlugin' },
    });
    w.source.add('/reg/dp.sock');
    w.source.add('/reg/dra.sock');
    await settle();
    assert.deepEqual(
      w.sockets.notifications.map((n) => [n.socketPath, n.registered, n.error]).sort(),
      [
        [
          '/reg/dp.sock',
          false,
          'RegisterPlugin error -- no handler registered for plugin type: DevicePlugin at socket /reg/dp.sock',
        ],
        [
          '/reg/dra.sock',
          false,
          'RegisterPlugin error -- no handler registered for plugin type: DRAPlugin at socket /reg/dra.sock',
        ],
      ],
    );
    assert.deepEqual(w.handler.calls, []);
    assert.deepEqual(w.pm.registered(), []);
    // Not again before the back-off (500 ms), again after it.
    await w.clock.advance(400);
    await settle();
    assert.equal(w.sockets.getInfoCalls.length, 2);
    await w.clock.advance(2_000);
    await settle();
    assert.equal(w.sockets.getInfoCalls.length, 4);
  });

  test('a failed validation is logged and reported to the plugin; nothing is registered', async () => {
    w.handler.failValidate = new Error('None of the versions specified ["2.0.0"] are supported');
    w.sockets.scripts.set('/reg/a.sock', { info: csiInfo('a.csi', ['2.0.0']) });
    w.source.add('/reg/a.sock');
    await settle();
    assert.deepEqual(w.handler.ops(), ['validate a.csi']);
    assert.deepEqual(w.sockets.notifications, [
      {
        socketPath: '/reg/a.sock',
        registered: false,
        error:
          'RegisterPlugin error -- plugin validation failed with err: None of the versions specified ["2.0.0"] are supported',
      },
    ]);
    const logged = w.logger.records.find((r) => r.msg === 'Plugin validation failed');
    assert.equal(logged?.level, 'error');
    assert.equal(logged.fields['pluginName'], 'a.csi');
    assert.deepEqual(w.pm.registered(), []);
  });

  test('a failed register is reported with registered=false and the error', async () => {
    w.handler.failRegister = new Error('NodeGetInfo failed');
    w.sockets.scripts.set('/reg/a.sock', { info: csiInfo('a.csi') });
    w.source.add('/reg/a.sock');
    await settle();
    assert.deepEqual(
      w.sockets.notifications.map((n) => n.error),
      ['RegisterPlugin error -- plugin registration failed with err: NodeGetInfo failed'],
    );
    assert.deepEqual(w.pm.registered(), []);
    // Once the driver works, the retry registers it.
    w.handler.failRegister = undefined;
    await w.clock.advance(2_000);
    await settle();
    assert.equal(w.pm.registered().length, 1);
  });

  test('a failed NotifyRegistrationStatus(true) undoes the registration', async () => {
    w.sockets.scripts.set('/reg/a.sock', {
      info: csiInfo('a.csi'),
      notifyError: new Error('broken pipe'),
    });
    w.source.add('/reg/a.sock');
    await settle();
    assert.deepEqual(w.handler.ops(), ['validate a.csi', 'register a.csi', 'deregister a.csi']);
    assert.deepEqual(w.pm.registered(), []);
  });

  test('a removed socket deregisters; a recreated one deregisters then registers again', async () => {
    w.sockets.scripts.set('/reg/a.sock', { info: csiInfo('a.csi') });
    w.source.add('/reg/a.sock');
    await settle();
    w.source.remove('/reg/a.sock');
    await settle();
    assert.deepEqual(w.handler.ops(), ['validate a.csi', 'register a.csi', 'deregister a.csi']);
    assert.deepEqual(w.pm.registered(), []);
    w.source.add('/reg/a.sock');
    await settle();
    w.source.add('/reg/a.sock'); // recreated (a new identity) while registered
    await settle();
    assert.deepEqual(w.handler.ops().slice(3), [
      'validate a.csi',
      'register a.csi',
      'deregister a.csi',
      'validate a.csi',
      'register a.csi',
    ]);
    assert.equal(w.pm.registered().length, 1);
  });

  test('a socket whose watch event was missed is found by the periodic rescan', async () => {
    w.source.watching = false;
    w.sockets.scripts.set('/reg/sub/a.sock', { info: csiInfo('a.csi') });
    w.source.add('/reg/sub/a.sock');
    await settle();
    assert.deepEqual(w.handler.calls, []);
    await w.clock.advance(2_000);
    await settle();
    assert.deepEqual(w.handler.ops(), ['validate a.csi', 'register a.csi']);
    w.source.remove('/reg/sub/a.sock');
    await w.clock.advance(2_000);
    await settle();
    assert.deepEqual(w.handler.ops().at(-1), 'deregister a.csi');
  });

  test('a socket that hangs or a handler that hangs delays only itself, bounded by the deadline', async () => {
    w.handler.hangRegister = true;
    w.sockets.scripts.set('/reg/slow.sock', { info: csiInfo('slow.csi') });
    w.source.add('/reg/slow.sock');
    await settle();
    w.handler.hangRegister = false;
    w.sockets.scripts.set('/reg/hang.sock', { info: csiInfo('hang.csi'), hangGetInfo: true });
    w.source.add('/reg/hang.sock');
    w.sockets.scripts.set('/reg/ok.sock', { info: csiInfo('ok.csi') });
    w.source.add('/reg/ok.sock');
    await settle();
    assert.deepEqual(
      w.pm.registered().map((p) => p.name),
      ['ok.csi'],
    );
    await w.clock.advance(10_000);
    await settle();
    const slow = w.sockets.notifications.find((n) => n.socketPath === '/reg/slow.sock');
    assert.equal(slow?.registered, false);
    assert.match(
      slow.error,
      /plugin registration failed with err: RegisterPlugin timed out after 10000 ms/,
    );
    assert.deepEqual(
      w.pm.registered().map((p) => p.name),
      ['ok.csi'],
    );
  });

  test('stop() ends hanging operations and deregisters nothing', async () => {
    w.sockets.scripts.set('/reg/hang.sock', { info: csiInfo('hang.csi'), hangGetInfo: true });
    w.source.add('/reg/hang.sock');
    await settle();
    await w.pm.stop();
    assert.equal(w.pm.state, 'STOPPED');
    assert.equal(w.sockets.closed, w.sockets.opened);
    assert.equal(w.logger.records.filter((r) => r.level === 'error').length, 0);
  });
});
