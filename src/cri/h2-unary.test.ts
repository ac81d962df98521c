/**
 * H2UnaryChannel against real gRPC servers on a unix socket: grpc-js's server for the
 * protocol as gRPC servers speak it (status, deadline, cancellation, restart), and a
 * bare HTTP/2 server for answers a gRPC server would not give (HTTP errors, resets,
 * malformed bodies), which the channel must still turn into a status.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import {
  constants,
  createServer,
  type Http2Server,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  Server,
  ServerCredentials,
  status as Status,
  type ServerUnaryCall,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { GrpcStatusError, H2UnaryChannel, grpcTimeout } from './h2-unary.ts';

const MAX = 64 * 1024;
const raw = (b: Buffer): Buffer => b;
const method = (path: string) => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: raw,
  requestDeserialize: raw,
  responseSerialize: raw,
  responseDeserialize: raw,
});

/** Requests the grpc-js server saw cancelled, by their body text. */
const cancelled: string[] = [];
/** Resolves the next time the hanging method receives a call. */
let hangArrived: () => void = () => undefined;

type Handler = (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => void;
const HANDLERS: Record<string, Handler> = {
  echo: (call, done) => {
    done(null, Buffer.concat([Buffer.from('echo:'), call.request]));
  },
  fail: (_call, done) => {
    done({ code: Status.NOT_FOUND, details: 'container "ä/b%20c" not found' });
  },
  big: (_call, done) => {
    done(null, Buffer.alloc(MAX + 1, 1));
  },
  hang: (call) => {
    call.on('cancelled', () => cancelled.push(call.request.toString()));
    hangArrived();
  },
};

async function startGrpc(socket: string): Promise<Server> {
  const server = new Server();
  server.addService(
    {
      echo: method('/t.T/Echo'),
      fail: method('/t.T/Fail'),
      big: method('/t.T/Big'),
      hang: method('/t.T/Hang'),
    },
    HANDLERS,
  );
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${socket}`, ServerCredentials.createInsecure(), (err) => {
      if (err === null) resolve();
      else reject(err);
    });
  });
  return server;
}

/** A bare HTTP/2 server whose every stream is answered by `answer`. */
async function startRaw(
  socket: string,
  answer: (stream: ServerHttp2Stream) => void,
): Promise<Http2Server> {
  const server = createServer();
  server.on('stream', (stream) => {
    stream.on('error', () => undefined);
    stream.resume();
    stream.on('end', () => {
      answer(stream);
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return server;
}

const closeRaw = (server: Http2Server): Promise<void> =>
  new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
  });

/** Asserts that `promise` rejects with a status error of `code`; returns it. */
async function rejectsWith(promise: Promise<unknown>, code: Status): Promise<GrpcStatusError> {
  let caught: unknown;
  await assert.rejects(promise, (err: unknown) => {
    caught = err;
    return true;
  });
  assert.ok(caught instanceof GrpcStatusError, String(caught));
  assert.equal(caught.code, code, caught.message);
  return caught;
}

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-h2-unary-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('H2UnaryChannel against a grpc-js server', () => {
  let socket = '';
  let server: Server;
  let channel: H2UnaryChannel;
  before(async () => {
    socket = join(dir, 'grpc.sock');
    server = await startGrpc(socket);
    channel = new H2UnaryChannel(socket, { maxMessageBytes: MAX });
  });
  after(() => {
    channel.close();
    server.forceShutdown();
  });

  test('a call returns the response message', async () => {
    const out = await channel.call('/t.T/Echo', Buffer.from('hi'));
    assert.equal(out.toString(), 'echo:hi');
  });

  test('concurrent calls share the connection and each gets its own answer', async () => {
    const outs = await Promise.all(
      ['a', 'b', 'c', 'd'].map((s) => channel.call('/t.T/Echo', Buffer.from(s))),
    );
    assert.deepEqual(
      outs.map((o) => o.toString()),
      ['echo:a', 'echo:b', 'echo:c', 'echo:d'],
    );
  });

  test('an error status keeps its code and its decoded message', async () => {
    const err = await rejectsWith(channel.call('/t.T/Fail', Buffer.alloc(0)), Status.NOT_FOUND);
    assert.equal(err.details, 'container "ä/b%20c" not found');
  });

  test('an unknown method is UNIMPLEMENTED', async () => {
    await rejectsWith(channel.call('/t.T/Nope', Buffer.alloc(0)), Status.UNIMPLEMENTED);
  });

  test('a response over the limit is RESOURCE_EXHAUSTED', async () => {
    await rejectsWith(channel.call('/t.T/Big', Buffer.alloc(0)), Status.RESOURCE_EXHAUSTED);
  });

  test('a request over the limit is refused before it is sent', async () => {
    await rejectsWith(channel.call('/t.T/Echo', Buffer.alloc(MAX + 1)), Status.RESOURCE_EXHAUSTED);
  });

  test('a passed deadline is DEADLINE_EXCEEDED and the server sees the call cancelled', async () => {
    const arrived = new Promise<void>((resolve) => (hangArrived = resolve));
    const call = channel.call('/t.T/Hang', Buffer.from('deadline'), {
      deadline: Date.now() + 200,
    });
    await arrived;
    await rejectsWith(call, Status.DEADLINE_EXCEEDED);
    await waitFor(() => cancelled.includes('deadline'));
  });

  test('a deadline already past fails without a call', async () => {
    await rejectsWith(
      channel.call('/t.T/Echo', Buffer.alloc(0), { deadline: Date.now() - 1 }),
      Status.DEADLINE_EXCEEDED,
    );
  });

  test('an abort is CANCELLED and cancels the call on the server', async () => {
    const controller = new AbortController();
    const arrived = new Promise<void>((resolve) => (hangArrived = resolve));
    const call = channel.call('/t.T/Hang', Buffer.from('abort'), { signal: controller.signal });
    await arrived;
    controller.abort(new Error('caller gave up'));
    await rejectsWith(call, Status.CANCELLED);
    await waitFor(() => cancelled.includes('abort'));
  });

  test('an aborted signal fails the call at once', async () => {
    await rejectsWith(
      channel.call('/t.T/Echo', Buffer.alloc(0), { signal: AbortSignal.abort() }),
      Status.CANCELLED,
    );
  });

  test('a restarted server is reached again by the next call', async () => {
    await channel.call('/t.T/Echo', Buffer.from('before'));
    server.forceShutdown();
    await rejectsWith(channel.call('/t.T/Echo', Buffer.alloc(0)), Status.UNAVAILABLE);
    server = await startGrpc(socket);
    const out = await channel.call('/t.T/Echo', Buffer.from('after'));
    assert.equal(out.toString(), 'echo:after');
  });

  test('close lets a call in flight finish and refuses new ones', async () => {
    const own = new H2UnaryChannel(socket, { maxMessageBytes: MAX });
    const inFlight = own.call('/t.T/Echo', Buffer.from('last'));
    own.close();
    own.close();
    assert.equal((await inFlight).toString(), 'echo:last');
    await rejectsWith(own.call('/t.T/Echo', Buffer.alloc(0)), Status.UNAVAILABLE);
  });
});

describe('H2UnaryChannel against answers no gRPC server should give', () => {
  const cases: {
    name: string;
    answer: (stream: ServerHttp2Stream) => void;
    code: Status;
  }[] = [
    {
      name: 'HTTP 503 without a grpc-status is UNAVAILABLE',
      answer: (s) => {
        s.respond({ ':status': 503 }, { endStream: true });
      },
      code: Status.UNAVAILABLE,
    },
    {
      name: 'HTTP 404 without a grpc-status is UNIMPLEMENTED',
      answer: (s) => {
        s.respond({ ':status': 404 }, { endStream: true });
      },
      code: Status.UNIMPLEMENTED,
    },
    {
      name: 'a refused stream is UNAVAILABLE',
      answer: (s) => {
        s.close(constants.NGHTTP2_REFUSED_STREAM);
      },
      code: Status.UNAVAILABLE,
    },
    {
      name: 'a reset after the headers is INTERNAL',
      answer: (s) => {
        s.respond({ ':status': 200, 'content-type': 'application/grpc' });
        s.write(Buffer.from([0, 0, 0, 0, 9, 1]));
        setImmediate(() => {
          s.close(constants.NGHTTP2_INTERNAL_ERROR);
        });
      },
      code: Status.INTERNAL,
    },
    {
      name: 'a body without trailers is INTERNAL',
      answer: (s) => {
        s.respond({ ':status': 200, 'content-type': 'application/grpc' });
        s.end(Buffer.from([0, 0, 0, 0, 0]));
      },
      code: Status.INTERNAL,
    },
    {
      name: 'two messages in a unary answer are INTERNAL',
      answer: (s) => {
        grpcAnswer(s, Buffer.from([0, 0, 0, 0, 1, 7, 0, 0, 0, 0, 1, 8]), { 'grpc-status': '0' });
      },
      code: Status.INTERNAL,
    },
    {
      name: 'OK without a message is INTERNAL',
      answer: (s) => {
        grpcAnswer(s, Buffer.alloc(0), { 'grpc-status': '0' });
      },
      code: Status.INTERNAL,
    },
    {
      name: 'a compressed message is INTERNAL (none was asked for)',
      answer: (s) => {
        grpcAnswer(s, Buffer.from([1, 0, 0, 0, 1, 7]), { 'grpc-status': '0' });
      },
      code: Status.INTERNAL,
    },
    {
      name: 'a malformed grpc-status is UNKNOWN',
      answer: (s) => {
        grpcAnswer(s, Buffer.alloc(0), { 'grpc-status': 'x' });
      },
      code: Status.UNKNOWN,
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const socket = join(dir, 'raw.sock');
      const server = await startRaw(socket, c.answer);
      const channel = new H2UnaryChannel(socket, { maxMessageBytes: MAX });
      try {
        await rejectsWith(channel.call('/t.T/X', Buffer.alloc(0)), c.code);
      } finally {
        channel.close();
        await closeRaw(server);
      }
    });
  }

  test('a trailers-only error answer carries its status and message', async () => {
    const socket = join(dir, 'raw.sock');
    const server = await startRaw(socket, (s) => {
      s.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc',
          'grpc-status': String(Status.INVALID_ARGUMENT),
          'grpc-message': 'bad%20%E2%9C%93',
        },
        { endStream: true },
      );
    });
    const channel = new H2UnaryChannel(socket, { maxMessageBytes: MAX });
    try {
      const err = await rejectsWith(
        channel.call('/t.T/X', Buffer.alloc(0)),
        Status.INVALID_ARGUMENT,
      );
      assert.equal(err.details, 'bad ✓');
    } finally {
      channel.close();
      await closeRaw(server);
    }
  });
});

test('a socket nobody listens on is UNAVAILABLE at once', async () => {
  const channel = new H2UnaryChannel(join(dir, 'nobody.sock'), { maxMessageBytes: MAX });
  try {
    const err = await rejectsWith(
      channel.call('/t.T/Echo', Buffer.alloc(0), { deadline: Date.now() + 5000 }),
      Status.UNAVAILABLE,
    );
    assert.match(err.details, /ENOENT/);
  } finally {
    channel.close();
  }
});

test('grpc-timeout is milliseconds, or seconds beyond eight digits', () => {
  assert.equal(grpcTimeout(0.2), '1m');
  assert.equal(grpcTimeout(120_000), '120000m');
  assert.equal(grpcTimeout(99_999_999), '99999999m');
  assert.equal(grpcTimeout(100_000_000), '100000S');
  assert.equal(grpcTimeout(1e15), '99999999S');
});

/** A gRPC answer: headers, `body`, then `trailers`. */
function grpcAnswer(s: ServerHttp2Stream, body: Buffer, trailers: OutgoingHttpHeaders): void {
  s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  s.on('wantTrailers', () => {
    s.sendTrailers(trailers);
  });
  s.end(body);
}

/** Polls `check` until it holds; the server learns of a cancellation asynchronously. */
async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.ok(check(), 'condition never held');
}
