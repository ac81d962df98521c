/**
 * gRPC probes against a grpc-js health server on 127.0.0.1: SERVING passes, other
 * statuses and errors fail with upstream's wording; the hand-written message codec.
 */
import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { decodeHealthCheckResponse, encodeHealthCheckRequest, grpcProbe } from './grpc-probe.ts';

/** The service name of a HealthCheckRequest (field 1), decoded the simple way. */
function serviceOf(buf: Buffer): string {
  if (buf.length === 0) return '';
  assert.equal(buf[0], 0x0a);
  return buf.subarray(2, 2 + (buf[1] ?? 0)).toString('utf8');
}

const STATUS: Record<string, number> = { '': 1, broken: 2, odd: 3 };

function check(call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>): void {
  const service = serviceOf(call.request);
  if (service === 'hang') return; // never answers: the deadline must end the call
  const value = STATUS[service];
  if (value === undefined) {
    done({ code: status.NOT_FOUND, details: 'unknown service' });
    return;
  }
  // An unknown extra field (7, varint) first: a decoder must skip it.
  done(null, Buffer.from([0x38, 0x05, 0x08, value]));
}

async function listen(withHealth: boolean): Promise<{ server: Server; port: number }> {
  const server = new Server();
  if (withHealth)
    server.addService(
      {
        Check: {
          path: '/grpc.health.v1.Health/Check',
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      { Check: check },
    );
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => {
      if (err === null) resolve(p);
      else reject(err);
    });
  });
  return { server, port };
}

describe('grpcProbe', () => {
  let health: { server: Server; port: number };
  let bare: { server: Server; port: number };
  const signal = new AbortController().signal;

  before(async () => {
    health = await listen(true);
    bare = await listen(false);
  });
  after(() => {
    health.server.forceShutdown();
    bare.server.forceShutdown();
  });

  const probe = (service: string, port = health.port) =>
    grpcProbe({ host: '127.0.0.1', port, service }, 1, signal);

  test('SERVING passes', async () => {
    assert.deepEqual(await probe(''), { result: 'success', output: 'service healthy' });
  });

  test('NOT_SERVING and SERVICE_UNKNOWN fail with the status name', async () => {
    assert.deepEqual(await probe('broken'), {
      result: 'failure',
      output: 'service unhealthy (responded with "NOT_SERVING")',
    });
    assert.equal(
      (await probe('odd')).output,
      'service unhealthy (responded with "SERVICE_UNKNOWN")',
    );
  });

  test('an error status fails with its code and details', async () => {
    assert.deepEqual(await probe('nope'), {
      result: 'failure',
      output: 'error: health rpc probe failed: rpc error: code = NotFound desc = unknown service',
    });
  });

  test('a server without the health service fails as not implementing it', async () => {
    const r = await probe('', bare.port);
    assert.equal(r.result, 'failure');
    assert.match(r.output, /^error: this server does not implement the grpc health protocol/);
  });

  test('a closed port fails as a connection error', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => {
      closed.listen(0, '127.0.0.1', r);
    });
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) =>
      closed.close(() => {
        r();
      }),
    );
    const r = await probe('', port);
    assert.equal(r.result, 'failure');
    assert.match(r.output, new RegExp(`^error: failed to connect service at "127.0.0.1:${port}"`));
  });

  test('aborting the signal cancels the call and rejects with its reason', async () => {
    const ac = new AbortController();
    const pending = grpcProbe(
      { host: '127.0.0.1', port: health.port, service: 'hang' },
      5,
      ac.signal,
    );
    setTimeout(() => {
      ac.abort(new Error('worker stopped'));
    }, 20);
    await assert.rejects(pending, /worker stopped/);
  });
});

describe('health message codec', () => {
  test('the request carries the service as field 1, nothing for the empty service', () => {
    assert.deepEqual([...encodeHealthCheckRequest('')], []);
    assert.deepEqual([...encodeHealthCheckRequest('ab')], [0x0a, 2, 0x61, 0x62]);
    const long = encodeHealthCheckRequest('s'.repeat(200));
    assert.deepEqual([...long.subarray(0, 3)], [0x0a, 0xc8, 0x01], 'two-byte varint length');
  });

  test('the response status is field 1; absent means UNKNOWN; junk is rejected', () => {
    assert.equal(decodeHealthCheckResponse(Buffer.from([0x08, 0x01])), 1);
    assert.equal(decodeHealthCheckResponse(Buffer.alloc(0)), 0);
    assert.equal(decodeHealthCheckResponse(Buffer.from([0x12, 0x01, 0x00, 0x08, 0x02])), 2);
    assert.throws(() => decodeHealthCheckResponse(Buffer.from([0x12, 0x05, 0x00])), /truncated/);
  });
});
