/**
 * kubelet_runtime_operations_* as GrpcCriClient records them, against a small grpc-js
 * server on a unix socket (the fake CRI runtime does not go through grpc-client.ts).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type sendUnaryData,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { cri, GrpcCriClient } from '../cri/index.ts';
import { criOperationType } from '../cri/grpc-client.ts';
import { KubeletMetrics } from './registry.ts';

describe('CRI client metrics', () => {
  let dir = '';
  let server: Server;
  let client: GrpcCriClient;
  const metrics = new KubeletMetrics();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-cri-metrics-'));
    server = new Server();
    const impl: UntypedServiceImplementation = {
      version: (
        _call: ServerUnaryCall<unknown, unknown>,
        cb: sendUnaryData<cri.VersionResponse>,
      ) => {
        cb(null, cri.VersionResponse.fromPartial({ runtimeName: 'test' }));
      },
      runPodSandbox: (_call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => {
        cb({ code: GrpcStatus.UNKNOWN, details: 'no network' });
      },
    };
    server.addService(cri.RuntimeServiceService, impl);
    const socket = join(dir, 'cri.sock');
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(`unix://${socket}`, ServerCredentials.createInsecure(), (err) => {
        if (err === null) resolve();
        else reject(err);
      });
    });
    client = new GrpcCriClient(socket, { metrics: metrics.cri, defaultTimeoutMs: 10_000 });
  });

  after(async () => {
    client.close();
    await new Promise<void>((resolve) => {
      server.tryShutdown(() => {
        resolve();
      });
    });
    await rm(dir, { recursive: true, force: true });
  });

  test('operation names follow upstream', () => {
    assert.equal(criOperationType('ListPodSandboxStats'), 'list_podsandbox_stats');
    assert.equal(criOperationType('RunPodSandbox'), 'run_podsandbox');
    assert.equal(criOperationType('ListContainers'), 'list_containers');
    assert.equal(criOperationType('ImageFsInfo'), 'image_fs_info');
    assert.equal(criOperationType('UpdateContainerResources'), 'update_container');
    assert.equal(criOperationType('ExecSync'), 'exec_sync');
  });

  test('each call is counted and timed; failures are counted as errors', async () => {
    await client.runtime.version({ version: '0.1.0' });
    await client.runtime.version({ version: '0.1.0' });
    await assert.rejects(client.runtime.runPodSandbox({ runtimeHandler: 'runc' }));
    // An RPC the server lacks is an error too.
    await assert.rejects(client.runtime.status({}));
    const text = await metrics.registry.metrics();
    assert.match(text, /^kubelet_runtime_operations_total\{operation_type="version"\} 2$/m);
    assert.match(
      text,
      /^kubelet_runtime_operations_duration_seconds_count\{operation_type="version"\} 2$/m,
    );
    assert.doesNotMatch(
      text,
      /kubelet_runtime_operations_errors_total\{operation_type="version"\}/,
    );
    assert.match(
      text,
      /^kubelet_runtime_operations_errors_total\{operation_type="run_podsandbox"\} 1$/m,
    );
    assert.match(text, /^kubelet_runtime_operations_errors_total\{operation_type="status"\} 1$/m);
    assert.match(text, /^kubelet_run_podsandbox_errors_total\{runtime_handler="runc"\} 1$/m);
    assert.match(
      text,
      /^kubelet_run_podsandbox_duration_seconds_count\{runtime_handler="runc"\} 1$/m,
    );
  });
});
