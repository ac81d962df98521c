import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { csiNodeClientContract } from './contract.ts';
import { FakeCsiDriver, FakeCsiNodeClient } from './fake.ts';
import { GrpcCsiNodeClient } from './grpc-client.ts';
import { FakeCsiDriverServer } from './test-server.ts';
import { socketPathOf } from './unary.ts';

csiNodeClientContract('fake', (timeoutMs) => {
  const driver = new FakeCsiDriver();
  const client = new FakeCsiNodeClient('fake.csi.berth', driver, { timeoutMs });
  return Promise.resolve({
    client,
    driver,
    stopDriver: () => {
      driver.stopped = true;
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  });
});

csiNodeClientContract('gRPC over a unix socket', async (timeoutMs) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-csi-'));
  const driver = new FakeCsiDriver();
  const server = new FakeCsiDriverServer(driver, join(dir, 'csi.sock'));
  await server.start();
  const client = new GrpcCsiNodeClient('fake.csi.berth', `unix://${server.socketPath}`, {
    timeoutMs,
  });
  return {
    client,
    driver,
    stopDriver: async () => {
      server.close();
      await rm(server.socketPath, { force: true });
    },
    close: async () => {
      client.close();
      server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

test('an endpoint is a unix:// address or a path', () => {
  assert.equal(
    socketPathOf('unix:///var/lib/kubelet/plugins/x/csi.sock'),
    '/var/lib/kubelet/plugins/x/csi.sock',
  );
  assert.equal(socketPathOf('/csi/csi.sock'), '/csi/csi.sock');
});
