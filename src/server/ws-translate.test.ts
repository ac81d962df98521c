import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { MemoryLogger } from '../util/logger.ts';
import { dataFrame, FrameReader, FrameType } from './spdy.ts';
import { isCompleteStatus } from './ws-translate.ts';
import {
  converse,
  conversedWithin,
  endingRuntime,
  fakeRuntime,
  kubeletSide,
  listen,
  OUTPUT_ONLY,
  statusOnlyRuntime,
  streamTypeOf,
  UPGRADED,
} from './ws-testing.ts';

describe('WebSocket streams translated by berth', () => {
  const streams = { stdin: true, stdout: true, stderr: true, tty: false };
  let runtime: ReturnType<typeof fakeRuntime>;
  let runtimePort: number;
  before(async () => {
    runtime = fakeRuntime(UPGRADED);
    runtimePort = await listen(runtime.server);
  });
  after(() => {
    runtime.server.close();
  });

  it('v5 channels: stdin to the runtime, its close signal as FIN, stdout and the status back', async () => {
    const kubelet = await kubeletSide(runtimePort, 'channels', streams);
    try {
      const { messages, code } = await converse(kubelet.port, 'v5.channel.k8s.io', (ws) => {
        ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('hello')]));
        ws.send(Buffer.from([255, 0]));
      });
      assert.equal(code, 1000);
      assert.deepEqual(
        messages.map((m) => [m[0], m.subarray(1).toString()]),
        [
          [1, ''],
          [1, 'hello'],
          [3, '{"status":"Success"}'],
        ],
      );
      const request = runtime.heads.at(-1) ?? '';
      assert.match(request, /^POST \/exec\/token HTTP\/1\.1/);
      assert.match(request, /\r\nUpgrade: SPDY\/3\.1/);
      assert.match(request, /\r\nX-Stream-Protocol-Version: v4\.channel\.k8s\.io/);
      assert.deepEqual(runtime.streamTypes.slice(-4), ['error', 'stdin', 'stdout', 'stderr']);
    } finally {
      kubelet.close();
    }
  });

  it('streams the runtime ends are not ended back, so its close cannot cut the status off', async () => {
    const ending = endingRuntime(100);
    const kubelet = await kubeletSide(await listen(ending.server), 'channels', OUTPUT_ONLY);
    try {
      const { messages, code } = await converse(kubelet.port, 'v5.channel.k8s.io', () => undefined);
      assert.equal(code, 1000);
      assert.deepEqual(
        messages.map((m) => [m[0], m.subarray(1).toString()]),
        [
          [1, ''],
          [3, '{"status":"Success"}'],
        ],
      );
      // client-go ends only stdin back; berth answering stdout's and stderr's ends was
      // the write that could meet the runtime's reset before the status was read.
      assert.deepEqual(ending.clientFins, []);
    } finally {
      kubelet.close();
      ending.server.close();
    }
  });

  it('a whole status ends the exec at once, without waiting for the runtime to end its stream', async () => {
    const status = '{"metadata":{},"status":"Failure","reason":"NonZeroExitCode"}';
    for (const parts of [[status], [status.slice(0, 20), `${status.slice(20)}\n`]]) {
      const silent = statusOnlyRuntime(parts, 50);
      const kubelet = await kubeletSide(await listen(silent.server), 'channels', OUTPUT_ONLY);
      try {
        // The runtime never ends anything: without the status check this waits forever.
        const { messages, code } = await conversedWithin(
          kubelet.port,
          'the exec did not end after its status',
        );
        assert.equal(code, 1000);
        // A status in two writes is not cut after the first: both parts reach the client.
        assert.deepEqual(
          messages.map((m) => [m[0], m.subarray(1).toString()]),
          [[1, ''], ...parts.map((p) => [3, p])],
        );
      } finally {
        kubelet.close();
        silent.close();
      }
    }
  });

  it('opens the exec streams with the upgrade request, not a round trip after the 101', async () => {
    // This runtime answers only once the request and all three SYN_STREAMs are in: were
    // the streams opened after its 101, neither side would move.
    const synTypes: string[] = [];
    const sockets = new Set<Socket>();
    const patient = createNetServer((socket: Socket) => {
      sockets.add(socket);
      let bytes = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        bytes = Buffer.concat([bytes, chunk]);
        const end = bytes.indexOf('\r\n\r\n');
        if (end < 0 || synTypes.length === 3) return;
        const ids = new Map<string, number>();
        for (const frame of new FrameReader().push(bytes.subarray(end + 4)))
          if (frame.kind === 'control' && frame.type === FrameType.SYN_STREAM)
            ids.set(streamTypeOf(frame.payload.subarray(10)), frame.payload.readUInt32BE(0));
        if (ids.size < 3) return;
        synTypes.push(...ids.keys());
        socket.write(UPGRADED);
        socket.end(dataFrame(ids.get('error') ?? 0, Buffer.from('{"status":"Success"}'), true));
      });
      socket.on('error', () => undefined);
    });
    const kubelet = await kubeletSide(await listen(patient), 'channels', OUTPUT_ONLY);
    try {
      const { messages, code } = await conversedWithin(
        kubelet.port,
        'the runtime never had the streams before its answer',
      );
      assert.equal(code, 1000);
      assert.deepEqual(synTypes, ['error', 'stdout', 'stderr']);
      assert.deepEqual(
        messages.map((m) => [m[0], m.subarray(1).toString()]),
        [
          [1, ''],
          [3, '{"status":"Success"}'],
        ],
      );
    } finally {
      kubelet.close();
      // Ending the runtime's side ends the client's too, should the test fail.
      for (const socket of sockets) socket.destroy();
      patient.close();
    }
  });

  it('a runtime that refuses the upgrade ends the stream with an InternalError status', async () => {
    const refusing = fakeRuntime(
      'HTTP/1.1 404 Not Found\r\nContent-Length: 14\r\n\r\nno such stream',
    );
    const kubelet = await kubeletSide(await listen(refusing.server), 'channels', streams);
    try {
      const { messages, code } = await converse(kubelet.port, 'v5.channel.k8s.io', () => undefined);
      assert.equal(code, 1000);
      const status = messages.find((m) => m[0] === 3);
      assert.ok(status !== undefined);
      const parsed = JSON.parse(status.subarray(1).toString()) as {
        reason?: unknown;
        code?: unknown;
        message?: unknown;
      };
      assert.equal(parsed.reason, 'InternalError');
      assert.equal(parsed.code, 500);
      assert.match(String(parsed.message), /unable to upgrade connection: no such stream/);
    } finally {
      kubelet.close();
      refusing.server.close();
    }
  });

  it('a port-forward tunnel carries bytes both ways once the runtime upgraded', async () => {
    const echo = createNetServer((socket) => {
      let upgraded = false;
      socket.on('data', (chunk: Buffer) => {
        if (!upgraded) {
          upgraded = true;
          assert.match(chunk.toString(), /X-Stream-Protocol-Version: portforward\.k8s\.io/);
          socket.write(
            'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n',
          );
          return;
        }
        socket.write(chunk);
      });
      socket.on('error', () => undefined);
    });
    const kubelet = await kubeletSide(await listen(echo), 'tunnel', streams);
    // A raw client: the protocol's name is not a token, so the ws client will not offer it.
    const client = connect({ host: '127.0.0.1', port: kubelet.port });
    try {
      let got = Buffer.alloc(0);
      client.on('data', (c: Buffer) => (got = Buffer.concat([got, c])));
      client.write(
        'GET /portForward/default/web HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n' +
          'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
          'Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n',
      );
      // One masked binary frame, as a client must send.
      const mask = Buffer.from([1, 2, 3, 4]);
      const payload = Buffer.from('spdy-bytes');
      const masked = payload.map((b, i) => b ^ (mask[i % 4] ?? 0));
      client.write(Buffer.concat([Buffer.from([0x82, 0x80 | payload.length]), mask, masked]));
      const frame = Buffer.concat([Buffer.from([0x82, payload.length]), payload]);
      const deadline = Date.now() + 5000;
      while (!got.includes(frame) && Date.now() < deadline) await once(client, 'data');
      const text = got.toString('latin1');
      assert.match(text, /^HTTP\/1\.1 101/);
      assert.match(text, /\r\nSec-WebSocket-Protocol: SPDY\/3\.1\+portforward\.k8s\.io\r\n/);
      assert.ok(got.includes(frame), JSON.stringify(text));
    } finally {
      client.destroy();
      kubelet.close();
      echo.close();
    }
  });

  it(
    'streamingConnectionIdleTimeout cuts a translated stream with no bytes either way',
    { timeout: 10_000 },
    async () => {
      const logger = new MemoryLogger();
      const kubelet = await kubeletSide(runtimePort, 'channels', streams, {
        logger,
        idleTimeoutMs: 300,
      });
      try {
        // The stand-in runtime waits for stdin to end, so nothing moves after the open.
        const { messages, code } = await converse(kubelet.port, 'v5.channel.k8s.io', (ws) => {
          ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('once')]));
        });
        // Terminated, not closed: no status reaches the client, only the abnormal close.
        assert.equal(code, 1006);
        assert.equal(
          messages.some((m) => m[0] === 3),
          false,
        );
        assert.ok(
          logger.records.some((r) => r.msg === 'Closing an idle stream'),
          JSON.stringify(logger.records),
        );
      } finally {
        kubelet.close();
      }
    },
  );

  it(
    'a stream whose bytes keep moving outlives the idle timeout',
    { timeout: 10_000 },
    async () => {
      const kubelet = await kubeletSide(runtimePort, 'channels', streams, { idleTimeoutMs: 1000 });
      try {
        const { messages, code } = await converse(kubelet.port, 'v5.channel.k8s.io', (ws) => {
          // 2.4 s of stdin, a chunk every 200 ms: twice the idle timeout, never idle for it.
          let sent = 0;
          const timer = setInterval(() => {
            if (sent++ < 12) ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('.')]));
            else {
              clearInterval(timer);
              ws.send(Buffer.from([255, 0]));
            }
          }, 200);
        });
        assert.equal(code, 1000);
        assert.equal(
          messages.filter((m) => m[0] === 1 && m.subarray(1).toString() === '.').length,
          12,
        );
        assert.deepEqual(
          messages.filter((m) => m[0] === 3).map((m) => m.subarray(1).toString()),
          ['{"status":"Success"}'],
        );
      } finally {
        kubelet.close();
      }
    },
  );
});

describe('isCompleteStatus', () => {
  it('is true only for a whole JSON object', () => {
    const yes = (s: string) => isCompleteStatus(Buffer.from(s));
    assert.equal(yes('{"status":"Success"}'), true);
    assert.equal(yes('{"metadata":{},"status":"Success"}\n'), true);
    assert.equal(yes('{"status":"Succ'), false);
    assert.equal(yes('{"a":{}'), false);
    assert.equal(yes('{"a":"}'), false);
    assert.equal(yes('[{}]'), false);
    assert.equal(yes(''), false);
  });
});
