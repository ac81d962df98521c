import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { MemoryLogger } from '../util/logger.ts';
import { FakeCsiDriver, FakeCsiNodeClient, FakeCsiNodeInfoManager } from './fake.ts';
import { CsiRegistrationHandler } from './registration-handler.ts';
import { CsiDriverRegistryImpl } from './registry.ts';

const signal = new AbortController().signal;

describe('CsiRegistrationHandler', () => {
  let driver: FakeCsiDriver;
  let registry: CsiDriverRegistryImpl;
  let nim: FakeCsiNodeInfoManager;
  let logger: MemoryLogger;
  let handler: CsiRegistrationHandler;

  beforeEach(() => {
    driver = new FakeCsiDriver();
    registry = new CsiDriverRegistryImpl((name) => new FakeCsiNodeClient(name, driver));
    nim = new FakeCsiNodeInfoManager();
    logger = new MemoryLogger();
    handler = new CsiRegistrationHandler(registry, nim, logger);
  });

  test('register: NodeGetInfo, then the node info; the registry serves the driver', async () => {
    await handler.validate('a.csi', '/csi/a.sock', ['1.0.0']);
    await handler.register('a.csi', '/csi/a.sock', ['1.0.0'], signal);
    assert.deepEqual(registry.drivers(), ['a.csi']);
    assert.deepEqual(driver.calls, [{ rpc: 'NodeGetInfo' }]);
    assert.deepEqual(nim.drivers.get('a.csi'), {
      nodeId: 'csi-node-1',
      maxVolumesPerNode: 16,
      topology: { 'topology.fake.csi/zone': 'zone-a' },
    });
    assert.ok(
      logger.records.some(
        (r) =>
          r.msg ===
          'kubernetes.io/csi: Register new plugin with name: a.csi at endpoint: /csi/a.sock',
      ),
    );
  });

  test('validate wraps the registry error as upstream', async () => {
    await assert.rejects(
      handler.validate('a.csi', '/csi/a.sock', ['0.3.0']),
      /^Error: validation failed for CSI Driver a.csi at endpoint \/csi\/a.sock: kubernetes.io\/csi: ValidatePlugin for CSI driver "a.csi" failed. None of the versions specified \["0.3.0"\] are supported/,
    );
  });

  test('a failing NodeGetInfo or node info write takes the driver out again', async () => {
    driver.failNext('NodeGetInfo', GrpcStatus.UNAVAILABLE, 'driver not ready');
    await assert.rejects(handler.register('a.csi', '/csi/a.sock', ['1.0.0'], signal), {
      code: 'BERTH_CSI_UNAVAILABLE',
    });
    assert.deepEqual(registry.drivers(), []);
    nim.fail = new Error('error updating CSINode');
    await assert.rejects(
      handler.register('a.csi', '/csi/a.sock', ['1.0.0'], signal),
      /error updating CSINode/,
    );
    assert.deepEqual(registry.drivers(), []);
    assert.deepEqual(nim.ops, ['uninstall a.csi', 'install a.csi', 'uninstall a.csi']);
  });

  test('deregister removes the driver everywhere, unless another endpoint replaced it', async () => {
    await handler.register('a.csi', '/csi/a.sock', ['1.0.0'], signal);
    await handler.register('a.csi', '/csi/a2.sock', ['1.1.0'], signal);
    await handler.deregister('a.csi', '/csi/a.sock', signal);
    assert.deepEqual(registry.drivers(), ['a.csi']);
    assert.equal(nim.drivers.has('a.csi'), true);
    await handler.deregister('a.csi', '/csi/a2.sock', signal);
    assert.deepEqual(registry.drivers(), []);
    assert.equal(nim.drivers.has('a.csi'), false);
  });

  test('a failed uninstall is logged, never thrown', async () => {
    await handler.register('a.csi', '/csi/a.sock', ['1.0.0'], signal);
    nim.fail = new Error('apiserver down');
    await handler.deregister('a.csi', '/csi/a.sock', signal);
    assert.deepEqual(registry.drivers(), []);
    const logged = logger.records.find((r) => r.level === 'error');
    assert.match(logged?.msg ?? '', /Error uninstalling CSI driver: apiserver down/);
  });
});
