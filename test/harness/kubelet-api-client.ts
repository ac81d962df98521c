/**
 * Calls straight to a kubelet's API (:10250), never through a proxy or the API server:
 * one-shot HTTPS requests, and raw WebSocket upgrades over TLS whose bytes the test
 * reads itself (to see the 101, the negotiated protocol and when the stream closes).
 */
import { request } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';

export interface Answer {
  readonly status: number;
  readonly body: string;
}

export interface ClientCert {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** One request to the kubelet API with node:https (at 127.0.0.1 unless a host is given). */
export function callBerth(
  port: number | { readonly host: string; readonly port: number },
  ca: Buffer,
  path: string,
  client?: ClientCert,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: typeof port === 'number' ? '127.0.0.1' : port.host,
        port: typeof port === 'number' ? port : port.port,
        path,
        method,
        ca,
        headers,
        ...(client !== undefined && { cert: client.cert, key: client.key }),
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A raw WebSocket upgrade in flight: everything read so far (latin1) and its fate. */
export interface RawStream {
  readonly socket: TLSSocket;
  received(): string;
  /** Resolves when the socket closes. */
  readonly closed: Promise<void>;
}

/** The headers of a WebSocket upgrade offering `protocols` (k8s channel protocols). */
export function websocketHeaders(protocols: readonly string[]): Record<string, string> {
  return {
    Connection: 'Upgrade',
    Upgrade: 'websocket',
    'Sec-WebSocket-Version': '13',
    'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Protocol': protocols.join(', '),
  };
}

/** The headers of a SPDY/3.1 upgrade offering `protocols`, as the API server sends it. */
export function spdyHeaders(protocols: readonly string[]): Record<string, string> {
  return {
    Connection: 'Upgrade',
    Upgrade: 'SPDY/3.1',
    'X-Stream-Protocol-Version': protocols.join(', '),
  };
}

/** Sends `GET path` with upgrade `headers` over TLS, authenticated by `client`. */
export function openUpgrade(
  port: number,
  ca: Buffer,
  path: string,
  client: ClientCert,
  headers: Record<string, string>,
): RawStream {
  const socket = connect({ host: '127.0.0.1', port, ca, cert: client.cert, key: client.key });
  let got = '';
  socket.on('data', (c: Buffer) => {
    got += c.toString('latin1');
  });
  const closed = new Promise<void>((resolve) => {
    socket.on('close', () => {
      resolve();
    });
  });
  // A reset after the peer closed is part of how streams end here, not a test failure.
  socket.on('error', () => undefined);
  socket.on('secureConnect', () => {
    const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
    socket.write(
      [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, ...lines, '', ''].join('\r\n'),
    );
  });
  return { socket, received: () => got, closed };
}
