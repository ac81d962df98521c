/**
 * WebSocket streams served by berth itself (ExtendWebSocketsToKubelet): a node that
 * declares the feature gets kubectl's WebSocket exec, attach and port-forward passed
 * through by the API server unchanged, instead of the API server translating them into
 * SPDY and relaying every frame through the kubelet. The SPDY the runtime's streaming
 * server speaks then stays on the node's loopback, which is why upstream moved the
 * translation there: creating an exec's streams is one round trip per stream, and
 * through the API server each crossed two more TLS hops.
 *
 * - v5.channel.k8s.io (exec, attach): WebSocket messages carry a channel byte (0 stdin,
 *   1 stdout, 2 stderr, 3 error, 4 resize, 255 close) and are mapped to the SPDY streams
 *   of remote command protocol v4 at the runtime (spdy.ts). The runtime's error stream
 *   already carries the metav1.Status a v5 client reads on channel 3.
 * - SPDY/3.1+portforward.k8s.io (port-forward): the WebSocket messages are SPDY bytes
 *   from kubectl, end to end with the runtime; berth opens the runtime's SPDY upgrade
 *   and moves the bytes between the two.
 *
 * Any other WebSocket protocol is proxied as is (streaming.ts): the runtime serves the
 * older channel protocols itself.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Logger } from '../util/logger.ts';
import type { StreamFlags, StreamKind } from './stream-target.ts';
import {
  controlStreamId,
  dataFrame,
  FrameReader,
  FrameType,
  HeaderBlockWriter,
  MAX_FRAME_PAYLOAD,
  pingFrame,
  SpdyProtocolError,
  synStream,
} from './spdy.ts';
import {
  openRuntime,
  RUNTIME_POOL as POOL,
  type Runtime,
  type RuntimeConnection,
  type StreamDialer,
} from './runtime-upgrade.ts';
import { runtimeStreamUrl, writeRawResponse } from './streaming.ts';
import { CONNECTION_CLOSED } from '../util/errors.ts';

export const V5_PROTOCOL = 'v5.channel.k8s.io';
export const TUNNEL_PROTOCOL = 'SPDY/3.1+portforward.k8s.io';
/** The remote command protocol berth asks of the runtime over SPDY. */
const RUNTIME_EXEC_PROTOCOL = 'v4.channel.k8s.io';
const RUNTIME_PORTFORWARD_PROTOCOL = 'portforward.k8s.io';

const Channel = { stdin: 0, stdout: 1, stderr: 2, error: 3, resize: 4, close: 255 } as const;

/** Pause the runtime side while this much is queued for the WebSocket client. */
const CLIENT_HIGH_WATER = 1024 * 1024;
/** Largest WebSocket message accepted from the client (stdin or tunnelled SPDY). */
const MAX_MESSAGE = 16 * 1024 * 1024;

export type Translation = 'channels' | 'tunnel';

function offeredProtocols(req: IncomingMessage): Set<string> {
  const raw = req.headers['sec-websocket-protocol'] ?? '';
  return new Set(
    raw
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== ''),
  );
}

/** The translation a WebSocket upgrade to `kind` asks for; undefined: proxy it as is. */
export function translationFor(kind: StreamKind, req: IncomingMessage): Translation | undefined {
  const offered = offeredProtocols(req);
  if (kind === 'portForward') return offered.has(TUNNEL_PROTOCOL) ? 'tunnel' : undefined;
  return offered.has(V5_PROTOCOL) ? 'channels' : undefined;
}

let wss: Promise<WebSocketServer> | undefined;

/**
 * Tunnel upgrades, answered with the tunnel protocol by hand: its name has a '/', which
 * is not a token character, so `ws` refuses a Sec-WebSocket-Protocol header holding it
 * (kubectl's Go client sends it all the same).
 */
const TUNNELS = new WeakSet<IncomingMessage>();

/** The WebSocket server, loaded on first use: most nodes never serve a stream. */
function webSocketServer(): Promise<WebSocketServer> {
  wss ??= import('ws').then(({ WebSocketServer: Server }) => {
    const server = new Server({
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload: MAX_MESSAGE,
      handleProtocols: (offered: Set<string>) => offered.has(V5_PROTOCOL) && V5_PROTOCOL,
    });
    server.on('headers', (headers: string[], req: IncomingMessage) => {
      if (TUNNELS.has(req)) headers.push(`Sec-WebSocket-Protocol: ${TUNNEL_PROTOCOL}`);
    });
    return server;
  });
  return wss;
}

export interface TranslateOptions {
  readonly logger: Logger;
  /** streamingConnectionIdleTimeout (ms); 0 never. */
  readonly idleTimeoutMs: number;
  /** Learns where the runtime's streams go, for the next stream's early connection. */
  readonly dialer?: StreamDialer;
  /** This stream's connection, opened while its URL was asked for (StreamDialer). */
  readonly early?: RuntimeConnection | undefined;
}

/** A metav1.Status as upstream's NewInternalError words it. */
function internalErrorStatus(message: string): string {
  return JSON.stringify({
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    details: { causes: [{ message }] },
    code: 500,
  });
}

/**
 * Accepts the WebSocket upgrade `req` and serves it by `translation` against the runtime
 * URL `target`. Never throws: failures close the WebSocket, or answer the upgrade.
 */
export function serveTranslated(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: string,
  translation: Translation,
  streams: StreamFlags | undefined,
  options: TranslateOptions,
): void {
  const url = runtimeStreamUrl(target);
  if (typeof url === 'string') {
    options.early?.socket.destroy();
    writeRawResponse(client, 500, url);
    return;
  }
  options.dialer?.remember(url);
  const abort = new AbortController();
  client.once('close', () => {
    abort.abort(CONNECTION_CLOSED);
  });
  // The runtime's upgrade goes out while the WebSocket handshake is answered, an exec's
  // streams with it.
  const opened =
    translation === 'channels'
      ? openStreams(streams ?? { stdin: false, stdout: true, stderr: true, tty: false })
      : undefined;
  const runtime = openRuntime(
    url,
    opened === undefined ? RUNTIME_PORTFORWARD_PROTOCOL : RUNTIME_EXEC_PROTOCOL,
    abort.signal,
    { ...(opened !== undefined && { preface: opened.synStreams }), early: options.early },
  );
  runtime.catch(() => undefined);
  if (translation === 'tunnel') {
    delete req.headers['sec-websocket-protocol'];
    TUNNELS.add(req);
  }
  webSocketServer()
    .then((server) => {
      // The 101 and the first message leave in one write (see corked below).
      corked(client, () => {
        server.handleUpgrade(req, client, head, (ws) => {
          const ctx = { ws, client, runtime, options };
          if (opened === undefined) tunnel(ctx);
          else channels(ctx, opened);
        });
      });
    })
    .catch((err: unknown) => {
      options.logger.error('Cannot serve a WebSocket stream', { error: String(err) });
      writeRawResponse(client, 500, 'Cannot serve the WebSocket stream');
    });
}

/**
 * Runs `f` with `socket` corked, so what it writes leaves in one write. On a TLS socket
 * a write queued behind another waits for that one's completion, a turn of the event
 * loop: a packet capture showed berth's close frame 0.5 ms after the status it
 * followed, and its first message 0.27 ms after the 101 (upstream's: 0.02-0.04 ms).
 */
function corked<T>(socket: Duplex, f: () => T): T {
  socket.cork();
  try {
    return f();
  } finally {
    socket.uncork();
  }
}

interface Ctx {
  readonly ws: WebSocket;
  readonly client: Duplex;
  readonly runtime: Promise<Runtime>;
  readonly options: TranslateOptions;
}

/** Backpressure both ways, and the idle cut. */
function wire(ctx: Ctx, r: Runtime): void {
  const { ws, client, options } = ctx;
  const { socket } = r;
  client.on('drain', () => {
    if (ws.bufferedAmount < CLIENT_HIGH_WATER) r.resume();
  });
  socket.on('drain', () => {
    ws.resume();
  });
  ws.on('close', () => socket.destroy());
  socket.on('error', (err) => {
    options.logger.debug('Stream runtime socket failed', { error: String(err) });
  });
  if (options.idleTimeoutMs > 0) {
    socket.setTimeout(options.idleTimeoutMs, () => {
      options.logger.info('Closing an idle stream', { idleTimeoutMs: options.idleTimeoutMs });
      socket.destroy();
      ws.terminate();
    });
  }
}

/** Sends one binary message; false when the client has enough queued to pause for. */
function sendToClient(ws: WebSocket, data: Buffer, sent?: () => void): boolean {
  if (ws.readyState !== ws.OPEN) {
    sent?.();
    return true;
  }
  ws.send(data, { binary: true }, sent);
  return ws.bufferedAmount < CLIENT_HIGH_WATER;
}

/** SPDY/3.1 carried in WebSocket messages, end to end between kubectl and the runtime. */
function tunnel(ctx: Ctx): void {
  const { ws, options } = ctx;
  const early: Buffer[] = [];
  let socket: Socket | undefined;
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) return;
    if (socket === undefined) early.push(data);
    else if (!socket.write(data)) ws.pause();
  });
  ctx.runtime.then(
    (r) => {
      socket = r.socket;
      if (ws.readyState !== ws.OPEN) {
        socket.destroy();
        return;
      }
      wire(ctx, r);
      for (const data of early.splice(0)) socket.write(data);
      const s = socket;
      // The pooled buffer goes back once ws has written the message.
      r.sink((buffer, n) =>
        sendToClient(ws, buffer.subarray(0, n), () => {
          POOL.give(buffer);
        }),
      );
      s.on('close', () => {
        if (ws.readyState === ws.OPEN) ws.close(1000);
      });
    },
    (err: unknown) => {
      options.logger.debug('Port-forward tunnel: runtime upgrade failed', { error: String(err) });
      if (ws.readyState === ws.OPEN)
        ws.close(1011, (err instanceof Error ? err.message : String(err)).slice(0, 120));
    },
  );
}

/** True when `bytes` is a whole JSON object: the runtime's metav1.Status, all of it. */
export function isCompleteStatus(bytes: Buffer): boolean {
  const text = bytes.toString('utf8').trimEnd();
  // Most partial statuses stop here, without a parse.
  if (!text.endsWith('}')) return false;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** The runtime's streams for an exec or attach, and the SYN_STREAMs that open them. */
interface OpenedStreams {
  readonly streams: StreamFlags;
  readonly synStreams: Buffer;
  readonly errorId: number;
  /** 0: no such stream. */
  readonly stdinId: number;
  readonly resizeId: number;
  /** The client channel of each stream the runtime writes. */
  readonly byStream: ReadonlyMap<number, number>;
}

/** The order and set of streams the runtime expects: its request was made with `streams`. */
function openStreams(streams: StreamFlags): OpenedStreams {
  const writer = new HeaderBlockWriter();
  const frames: Buffer[] = [];
  let nextId = 1;
  const open = (type: string): number => {
    const id = nextId;
    nextId += 2;
    frames.push(synStream(id, [['streamtype', type]], writer));
    return id;
  };
  const byStream = new Map<number, number>();
  const errorId = open('error');
  byStream.set(errorId, Channel.error);
  const stdinId = streams.stdin ? open('stdin') : 0;
  if (streams.stdout) byStream.set(open('stdout'), Channel.stdout);
  if (streams.stderr) byStream.set(open('stderr'), Channel.stderr);
  const resizeId = streams.tty ? open('resize') : 0;
  return {
    streams,
    synStreams: Buffer.concat(frames),
    errorId,
    stdinId,
    resizeId,
    byStream,
  };
}

/** v5.channel.k8s.io on the client side, remote command v4 over SPDY at the runtime. */
function channels(ctx: Ctx, opened: OpenedStreams): void {
  const { streams, errorId, stdinId, resizeId, byStream } = opened;
  const { ws, options } = ctx;
  const send = (channel: number, data: Buffer): boolean => {
    const message = Buffer.allocUnsafe(data.length + 1);
    message[0] = channel;
    data.copy(message, 1);
    return sendToClient(ws, message);
  };
  let finished = false;
  let statusSent = false;
  const finish = (failure?: string): void => {
    if (finished) return;
    finished = true;
    if (failure !== undefined && !statusSent)
      send(Channel.error, Buffer.from(internalErrorStatus(failure)));
    if (ws.readyState === ws.OPEN) ws.close(1000);
  };
  // As upstream: an empty message on the lowest channel the server writes tells the
  // client the stream is up.
  send(
    streams.stdout ? Channel.stdout : streams.stderr ? Channel.stderr : Channel.error,
    Buffer.alloc(0),
  );

  const early: Buffer[] = [];
  let socket: Socket | undefined;
  /** Streams whose client side berth has ended (FIN sent). */
  const ended = new Set<number>();
  const toRuntime = (streamId: number, data: Buffer, fin: boolean): void => {
    if (socket === undefined || streamId === 0 || ended.has(streamId)) return;
    if (fin) ended.add(streamId);
    let ok = true;
    for (let at = 0; at < data.length || (at === 0 && fin); at += MAX_FRAME_PAYLOAD) {
      const part = data.subarray(at, at + MAX_FRAME_PAYLOAD);
      ok = socket.write(dataFrame(streamId, part, fin && at + part.length >= data.length));
      if (data.length === 0) break;
    }
    if (!ok) ws.pause();
  };
  const onMessage = (data: Buffer): void => {
    const channel = data[0];
    const payload = data.subarray(1);
    if (channel === Channel.stdin) toRuntime(stdinId, payload, false);
    else if (channel === Channel.resize) toRuntime(resizeId, payload, false);
    else if (channel === Channel.close && payload[0] === Channel.stdin)
      toRuntime(stdinId, Buffer.alloc(0), true);
  };
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary || data.length === 0) return;
    if (socket === undefined) early.push(data);
    else onMessage(data);
  });

  ctx.runtime.then(
    (r) => {
      const s = r.socket;
      socket = s;
      if (ws.readyState !== ws.OPEN) {
        s.destroy();
        return;
      }
      wire(ctx, r);
      // The streams opened with the upgrade request; stdin that came meanwhile follows,
      // corked into one packet.
      corked(s, () => {
        for (const data of early.splice(0)) onMessage(data);
      });

      const reader = new FrameReader();
      let status = Buffer.alloc(0);
      /** Reads one chunk's frames; false when the client has enough queued to pause. */
      const onChunk = (chunk: Buffer): boolean => {
        let more = true;
        let statusComplete = false;
        for (const frame of reader.push(chunk)) {
          if (frame.kind === 'data') {
            const channel = byStream.get(frame.streamId);
            if (channel !== undefined && frame.data.length > 0) {
              if (channel === Channel.error) {
                statusSent = true;
                status = Buffer.concat([status, frame.data]);
                statusComplete = isCompleteStatus(status);
              }
              more = send(channel, frame.data) && more;
            }
            // The runtime ending stdin is answered by ending it here, as client-go does
            // (a runtime whose attach waits for all three streams needs it). No other
            // stream is answered: the runtime closes the connection after the status,
            // and a write that meets that close (ECONNRESET) made Node destroy the socket
            // with the status still unread, about one exec in 500 (`kubectl exec --
            // true` answered "the runtime closed the stream without a status").
            if (frame.fin && frame.streamId === stdinId)
              toRuntime(frame.streamId, Buffer.alloc(0), true);
            // The runtime writes the status last; its end is the exec's.
            if (frame.fin && frame.streamId === errorId) finish();
          } else if (frame.type === FrameType.PING) {
            s.write(pingFrame(frame.payload));
          } else if (frame.type === FrameType.RST_STREAM) {
            options.logger.debug('Runtime reset a stream', { streamId: controlStreamId(frame) });
          }
        }
        // The runtime writes the status once the command is over and its output copied,
        // so a whole status ends the exec: the client (which reads the error channel to
        // its end) gets the close now, not when the runtime's end of that stream comes in
        // a later write (a third of a millisecond later here, on every exec).
        if (statusComplete) finish();
        return more;
      };
      // The frame reader copies what it keeps, so the pooled buffer goes back at once.
      // What one read yields (output, the status, the close) goes out in one write.
      r.sink((buffer, n) => {
        try {
          return corked(ctx.client, () => onChunk(buffer.subarray(0, n)));
        } catch (err) {
          if (!(err instanceof SpdyProtocolError)) throw err;
          options.logger.debug('Runtime sent bad SPDY', { error: err.message });
          s.destroy();
          finish(err.message);
          return false;
        } finally {
          POOL.give(buffer);
        }
      });
      s.on('close', () => {
        finish(statusSent ? undefined : 'the runtime closed the stream without a status');
      });
    },
    (err: unknown) => {
      finish(err instanceof Error ? err.message : String(err));
    },
  );
}
