/** Fake runtimes and a kubelet side for the WebSocket translation tests (ws-translate.test.ts). */
import { once } from 'node:events';
import {
  createServer as createNetServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import { constants, inflateRawSync } from 'node:zlib';
import { WebSocket } from 'ws';
import { createServer as createHttpServer } from '../util/node-http.ts';
import { MemoryLogger } from '../util/logger.ts';
import { dataFrame, FrameReader, FrameType } from './spdy.ts';
import { nameValues } from './spdy-testing.ts';
import type { StreamFlags } from './stream-target.ts';
import { serveTranslated, type Translation } from './ws-translate.ts';

/** The stream type in a SYN_STREAM's header block (stored deflate blocks, no context). */
export function streamTypeOf(block: Buffer): string {
  const body = block[0] === 0x78 ? block.subarray(2) : block;
  const raw = inflateRawSync(body, { finishFlush: constants.Z_SYNC_FLUSH });
  return nameValues(raw).find(([name]) => name === 'streamtype')?.[1] ?? '';
}

/**
 * A runtime that answers the upgrade, records the SYN_STREAMs and the streams the
 * client ended, and once the stderr stream is open hands the socket and the stream IDs
 * by type to `script`, which plays the runtime's end of the exec.
 */
function scriptedRuntime(script: (socket: Socket, ids: ReadonlyMap<string, number>) => void): {
  server: Server;
  clientFins: string[];
  close: () => void;
} {
  const clientFins: string[] = [];
  const sockets = new Set<Socket>();
  const server = createNetServer((socket: Socket) => {
    sockets.add(socket);
    let upgraded = false;
    const reader = new FrameReader();
    const types = new Map<number, string>();
    const ids = new Map<string, number>();
    const onFrames = (chunk: Buffer): void => {
      for (const frame of reader.push(chunk)) {
        if (frame.kind === 'control' && frame.type === FrameType.SYN_STREAM) {
          const id = frame.payload.readUInt32BE(0);
          const type = streamTypeOf(frame.payload.subarray(10));
          types.set(id, type);
          ids.set(type, id);
          if (type === 'stderr') script(socket, ids);
        } else if (frame.kind === 'data' && frame.fin) {
          clientFins.push(types.get(frame.streamId) ?? String(frame.streamId));
        }
      }
    };
    socket.on('data', (chunk: Buffer) => {
      if (upgraded) {
        onFrames(chunk);
        return;
      }
      upgraded = true;
      socket.write(UPGRADED);
      const end = chunk.indexOf('\r\n\r\n');
      if (end >= 0 && end + 4 < chunk.length) onFrames(chunk.subarray(end + 4));
    });
    socket.on('error', () => undefined);
  });
  const close = (): void => {
    for (const socket of sockets) socket.destroy();
    server.close();
  };
  return { server, clientFins, close };
}

/**
 * A runtime that ends an exec as containerd does: stdout and stderr end (FIN) first,
 * then, `pauseMs` later, the status goes out on the error stream and the connection
 * closes at once, with a reset (as a Go server closing with unread bytes does).
 */
export function endingRuntime(pauseMs: number): { server: Server; clientFins: string[] } {
  return scriptedRuntime((socket, ids) => {
    socket.write(dataFrame(ids.get('stdout') ?? 0, Buffer.alloc(0), true));
    socket.write(dataFrame(ids.get('stderr') ?? 0, Buffer.alloc(0), true));
    setTimeout(() => {
      socket.write(dataFrame(ids.get('error') ?? 0, Buffer.from('{"status":"Success"}'), true));
      socket.resetAndDestroy();
    }, pauseMs);
  });
}

/**
 * A runtime that writes the status in `parts` (one data frame each, `gapMs` apart) and
 * then neither ends the error stream nor closes: only the status can end the exec.
 */
export function statusOnlyRuntime(
  parts: readonly string[],
  gapMs: number,
): { server: Server; close: () => void } {
  return scriptedRuntime((socket, ids) => {
    parts.forEach((part, i) => {
      setTimeout(() => {
        socket.write(dataFrame(ids.get('error') ?? 0, Buffer.from(part), false));
      }, i * gapMs);
    });
  });
}

/**
 * A stand-in for the runtime's streaming server, as containerd's behaves over SPDY: it
 * reads the client's SYN_STREAM headers (through one inflater for the connection),
 * echoes stdin to stdout until stdin ends, then writes the status on the error stream.
 * The real one is exercised by test/e2e/kubelet-api.test.ts.
 */
export function fakeRuntime(answer: string): {
  server: Server;
  heads: string[];
  streamTypes: string[];
} {
  const heads: string[] = [];
  const streamTypes: string[] = [];
  const server = createNetServer((socket: Socket) => {
    let head = '';
    const reader = new FrameReader();
    const ids = new Map<string, number>();
    const onFrames = (chunk: Buffer): void => {
      for (const frame of reader.push(chunk)) {
        if (frame.kind === 'control' && frame.type === FrameType.SYN_STREAM) {
          const type = streamTypeOf(frame.payload.subarray(10));
          streamTypes.push(type);
          ids.set(type, frame.payload.readUInt32BE(0));
        } else if (frame.kind === 'data' && frame.streamId === ids.get('stdin')) {
          const stdout = ids.get('stdout') ?? 0;
          if (frame.data.length > 0) socket.write(dataFrame(stdout, frame.data, false));
          if (frame.fin) {
            socket.write(
              dataFrame(ids.get('error') ?? 0, Buffer.from('{"status":"Success"}'), true),
            );
            socket.end();
          }
        }
      }
    };
    socket.on('data', (chunk: Buffer) => {
      if (head.endsWith('\r\n\r\n')) {
        onFrames(chunk);
        return;
      }
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      heads.push(head.slice(0, end));
      const rest = Buffer.from(head.slice(end + 4), 'latin1');
      head = head.slice(0, end + 4);
      socket.write(answer);
      if (answer.startsWith('HTTP/1.1 101')) {
        if (rest.length > 0) onFrames(rest);
      } else socket.end();
    });
    socket.on('error', () => undefined);
  });
  return { server, heads, streamTypes };
}

export const UPGRADED =
  'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
  'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n';

/** A kubelet-side server that hands every upgrade to serveTranslated. */
export async function kubeletSide(
  runtimePort: number,
  translation: Translation,
  streams: StreamFlags,
  options: { readonly logger?: MemoryLogger; readonly idleTimeoutMs?: number } = {},
): Promise<{ port: number; close: () => void }> {
  const server = createHttpServer();
  server.on('upgrade', (req, socket, head: Buffer) => {
    serveTranslated(
      req,
      socket,
      head,
      `http://127.0.0.1:${runtimePort}/exec/token`,
      translation,
      streams,
      { logger: options.logger ?? new MemoryLogger(), idleTimeoutMs: options.idleTimeoutMs ?? 0 },
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

export async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

/** Connects with `protocol`; resolves with every message and the close code. */
export function converse(
  port: number,
  protocol: string,
  send: (ws: WebSocket) => void,
): Promise<{ messages: Buffer[]; code: number }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/exec`, [protocol]);
  const messages: Buffer[] = [];
  ws.on('message', (data: Buffer) => messages.push(data));
  ws.on('open', () => {
    send(ws);
  });
  return new Promise((resolve, reject) => {
    ws.on('close', (code) => {
      resolve({ messages, code });
    });
    ws.on('error', reject);
  });
}

/** A v5 exec with nothing sent, ended within 5 s or rejected with `failure`. */
export function conversedWithin(
  port: number,
  failure: string,
): Promise<{ messages: Buffer[]; code: number }> {
  return Promise.race([
    converse(port, 'v5.channel.k8s.io', () => undefined),
    new Promise<never>((_, reject) =>
      setTimeout(() => {
        reject(new Error(failure));
      }, 5000).unref(),
    ),
  ]);
}

/** Output only, as `kubectl exec pod -- cmd` asks. */
export const OUTPUT_ONLY: StreamFlags = { stdin: false, stdout: true, stderr: true, tty: false };
