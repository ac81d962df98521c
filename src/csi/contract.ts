/**
 * The CsiNodeClient contract: the fake client and the gRPC client against a served
 * FakeCsiDriver both pass it (grpc-client.test.ts), so consumers' tests on the fake
 * hold for the real thing.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { isAbortError } from '../util/errors.ts';
import type { FakeCsiDriver } from './fake.ts';
import { CsiError, type CsiNodeClient, type CsiVolumeCapability } from './types.ts';

export interface CsiContractHarness {
  readonly client: CsiNodeClient;
  readonly driver: FakeCsiDriver;
  /** Takes the driver away (its socket closes); later calls find nothing to talk to. */
  stopDriver(): Promise<void>;
  close(): Promise<void>;
}

/** `make` builds a client whose calls time out after `timeoutMs`. */
export function csiNodeClientContract(
  name: string,
  make: (timeoutMs: number) => Promise<CsiContractHarness>,
): void {
  describe(`CsiNodeClient contract: ${name}`, () => {
    let h: CsiContractHarness;
    const signal = (): AbortSignal => new AbortController().signal;
    const mount: CsiVolumeCapability = {
      accessType: { kind: 'mount', fsType: 'ext4', mountFlags: ['noatime'] },
      accessMode: 'SINGLE_NODE_WRITER',
    };
    beforeEach(async () => {
      h = await make(300);
    });
    afterEach(async () => {
      await h.close();
    });

    test('NodeGetInfo and NodeGetCapabilities return what the driver reports', async () => {
      assert.deepEqual(await h.client.nodeGetInfo(signal()), h.driver.state.info);
      assert.deepEqual(await h.client.nodeGetCapabilities(signal()), h.driver.state.capabilities);
      h.driver.state = {
        ...h.driver.state,
        info: { nodeId: 'other', maxVolumesPerNode: 0, accessibleTopology: {} },
      };
      assert.deepEqual(await h.client.nodeGetInfo(signal()), {
        nodeId: 'other',
        maxVolumesPerNode: 0,
        accessibleTopology: {},
      });
    });

    test('stage, publish, unpublish, unstage reach the driver with their volume and paths', async () => {
      const common = { volumeId: 'vol-1', publishContext: {}, secrets: {}, volumeContext: {} };
      await h.client.nodeStageVolume(
        { ...common, stagingTargetPath: '/st/vol-1', volumeCapability: mount },
        signal(),
      );
      await h.client.nodePublishVolume(
        {
          ...common,
          stagingTargetPath: '/st/vol-1',
          targetPath: '/pods/a/vol-1',
          readonly: true,
          volumeCapability: { accessType: { kind: 'block' }, accessMode: 'SINGLE_NODE_WRITER' },
        },
        signal(),
      );
      await h.client.nodeUnpublishVolume('vol-1', '/pods/a/vol-1', signal());
      await h.client.nodeUnstageVolume('vol-1', '/st/vol-1', signal());
      assert.deepEqual(h.driver.calls, [
        { rpc: 'NodeStageVolume', volumeId: 'vol-1', path: '/st/vol-1', accessType: 'mount' },
        {
          rpc: 'NodePublishVolume',
          volumeId: 'vol-1',
          path: '/pods/a/vol-1',
          readonly: true,
          accessType: 'block',
        },
        { rpc: 'NodeUnpublishVolume', volumeId: 'vol-1', path: '/pods/a/vol-1' },
        { rpc: 'NodeUnstageVolume', volumeId: 'vol-1', path: '/st/vol-1' },
      ]);
    });

    test('NodeGetVolumeStats and NodeExpandVolume carry 64-bit numbers', async () => {
      const big = 2n ** 62n + 7n;
      h.driver.state = {
        ...h.driver.state,
        stats: { usage: [{ unit: 'BYTES', available: big, total: big, used: 0n }] },
      };
      const stats = await h.client.nodeGetVolumeStats('vol-1', '/pods/a/vol-1', '', signal());
      assert.deepEqual(stats.usage, [{ unit: 'BYTES', available: big, total: big, used: 0n }]);
      const grown = await h.client.nodeExpandVolume(
        {
          volumeId: 'vol-1',
          volumePath: '/pods/a/vol-1',
          requiredBytes: big,
          stagingTargetPath: '',
          volumeCapability: mount,
        },
        signal(),
      );
      assert.equal(grown, big);
      assert.equal(h.driver.callsOf('NodeExpandVolume')[0]?.requiredBytes, big);
    });

    test("a driver's gRPC error becomes BERTH_CSI_CALL_FAILED with its code and message", async () => {
      h.driver.failNext('NodePublishVolume', GrpcStatus.NOT_FOUND, 'volume vol-9 does not exist');
      const err = await h.client
        .nodePublishVolume(
          {
            volumeId: 'vol-9',
            publishContext: {},
            stagingTargetPath: '',
            targetPath: '/t',
            volumeCapability: mount,
            readonly: false,
            secrets: {},
            volumeContext: {},
          },
          signal(),
        )
        .then(
          () => assert.fail('the call succeeded'),
          (e: unknown) => e,
        );
      assert.ok(err instanceof CsiError);
      assert.equal(err.code, 'BERTH_CSI_CALL_FAILED');
      assert.equal(err.grpcCode, GrpcStatus.NOT_FOUND);
      assert.equal(err.message, 'rpc error: code = NotFound desc = volume vol-9 does not exist');
    });

    test('an empty node ID is a bad reply', async () => {
      h.driver.state = {
        ...h.driver.state,
        info: { nodeId: '', maxVolumesPerNode: 0, accessibleTopology: {} },
      };
      await assert.rejects(h.client.nodeGetInfo(signal()), { code: 'BERTH_CSI_BAD_REPLY' });
    });

    test('a call the driver never answers ends at the deadline', async () => {
      h.driver.hangNext('NodeGetInfo');
      await assert.rejects(h.client.nodeGetInfo(signal()), { code: 'BERTH_CSI_DEADLINE' });
      // The next call is answered again.
      assert.equal((await h.client.nodeGetInfo(signal())).nodeId, h.driver.state.info.nodeId);
    });

    test("the caller's signal ends a call with an AbortError, before or during it", async () => {
      const before = new AbortController();
      before.abort();
      await assert.rejects(h.client.nodeGetCapabilities(before.signal), isAbortError);
      assert.equal(h.driver.calls.length, 0);
      h.driver.hangNext('NodeUnstageVolume');
      const during = new AbortController();
      const call = h.client.nodeUnstageVolume('vol-1', '/st', during.signal);
      setTimeout(() => {
        during.abort();
      }, 20);
      await assert.rejects(call, (e: unknown) => isAbortError(e) && !(e instanceof CsiError));
    });

    test('a driver that is gone is BERTH_CSI_UNAVAILABLE', async () => {
      await h.stopDriver();
      await assert.rejects(h.client.nodeGetInfo(signal()), { code: 'BERTH_CSI_UNAVAILABLE' });
    });
  });
}
