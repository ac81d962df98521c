/**
 * A fault proxy in front of kube-apiserver, owned by the test: berth's kubeconfig points
 * here, the proxy terminates TLS (with the apiserver's serving certificate, so berth's
 * CA check passes) and forwards every request upstream as the node (its client
 * certificate), streaming watches through. For a window the test sets a mode:
 * - `429`: Too Many Requests with Retry-After: 1 (the apiserver's overload answer);
 * - `500`: Internal Server Error with a Status body;
 * - `hang`: the request is read and never answered (until the mode changes);
 * - `watch-410`: watches get the apiserver's "too old resource version" (an ERROR event
 *   whose Status has code 410), everything else (lists, and watches that are lists:
 *   sendInitialEvents=true) passes. The watches running when the
 *   window opens are ended as the apiserver ends one at its timeout (the stream
 *   closes cleanly), so every reflector watches again within the window: a kubelet
 *   whose watches last minutes (client-go's) would otherwise meet no 410 at all.
 * It counts what it saw per mode, so the test can tell backoff from a hot loop.
 */
import { readFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FaultMode = 'pass' | '429' | '500' | 'hang' | 'watch-410';

export interface FaultProxyOptions {
  /** The apiserver, e.g. https://127.0.0.1:6443. */
  readonly upstream: string;
  readonly caFile: string;
  /** The proxy's serving pair (the apiserver's: its SANs include 127.0.0.1). */
  readonly servingCert: { readonly cert: string; readonly key: string };
  /** The identity the proxy uses upstream; read at each request (certificates rotate). */
  readonly clientCert: { readonly cert: string; readonly key: string };
}

export interface FaultProxy {
  readonly url: string;
  mode: FaultMode;
  /** Requests seen per mode since start (a watch counts once, when it starts). */
  readonly counts: Record<FaultMode, number>;
  /** Requests per path kind while not passing: `GET /api/v1/pods?watch` -> count. */
  readonly faulted: Map<string, number>;
  close(): Promise<void>;
}

function status(code: number, reason: string, message: string): string {
  return JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  });
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const [ca, cert, key] = await Promise.all([
    readFile(options.caFile),
    readFile(options.servingCert.cert),
    readFile(options.servingCert.key),
  ]);
  const upstream = new URL(options.upstream);
  const hung = new Set<ServerResponse>();
  const counts: Record<FaultMode, number> = {
    pass: 0,
    '429': 0,
    '500': 0,
    hang: 0,
    'watch-410': 0,
  };
  const faulted = new Map<string, number>();
  const proxy = { mode: 'pass' as FaultMode };

  /** Watches being streamed through, with a way to end each cleanly. */
  const watching = new Map<ServerResponse, () => void>();

  const forward = async (
    req: IncomingMessage,
    res: ServerResponse,
    watch: boolean,
  ): Promise<void> => {
    const [clientCert, clientKey] = await Promise.all([
      readFile(options.clientCert.cert),
      readFile(options.clientCert.key),
    ]);
    const headers = { ...req.headers, host: upstream.host };
    const up = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers,
        ca,
        cert: clientCert,
        key: clientKey,
        agent: false,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
        if (watch) {
          watching.set(res, () => {
            upRes.unpipe(res);
            up.destroy();
            res.end();
          });
          res.on('close', () => watching.delete(res));
        }
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    res.on('close', () => up.destroy());
    req.pipe(up);
  };

  const server: Server = createServer({ cert, key, ca, requestCert: false }, (req, res) => {
    const mode = proxy.mode;
    const url = new URL(req.url ?? '/', 'https://proxy');
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    // A watch with sendInitialEvents is a list (client-go's WatchList, on by default since
    // 1.34): it names no resourceVersion that could be too old, and an apiserver never
    // answers it 410; it passes like any list.
    const watchList = url.searchParams.get('sendInitialEvents') === 'true';
    const effective: FaultMode = mode === 'watch-410' && (!watch || watchList) ? 'pass' : mode;
    counts[effective]++;
    if (effective !== 'pass') {
      const kind = `${req.method ?? '?'} ${url.pathname}${watch ? '?watch' : ''}`;
      faulted.set(kind, (faulted.get(kind) ?? 0) + 1);
    }
    switch (effective) {
      case 'pass':
        forward(req, res, watch).catch(() => res.destroy());
        return;
      case '429':
        req.resume();
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(status(429, 'TooManyRequests', 'the fault proxy says: too many requests'));
        return;
      case '500':
        req.resume();
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(status(500, 'InternalError', 'the fault proxy says: internal error'));
        return;
      case 'hang':
        req.resume();
        hung.add(res);
        res.on('close', () => hung.delete(res));
        return;
      case 'watch-410':
        req.resume();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          `${JSON.stringify({
            type: 'ERROR',
            object: JSON.parse(
              status(410, 'Expired', 'too old resource version: 1 (2) [fault proxy]'),
            ) as unknown,
          })}\n`,
        );
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    get mode() {
      return proxy.mode;
    },
    set mode(m: FaultMode) {
      proxy.mode = m;
      // Hung requests end with the window: the connection drops, as a dead LB's would.
      if (m !== 'hang') for (const res of hung) res.destroy();
      if (m === 'watch-410') for (const end of [...watching.values()]) end();
    },
    counts,
    faulted,
    close: async () => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
    },
  };
}
