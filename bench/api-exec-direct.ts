/**
 * One exec sent straight to a node agent's kubelet API, the way the API server passes
 * kubectl's through since ExtendWebSocketsToKubelet: a WebSocket (v5.channel.k8s.io) on
 * a new TLS connection (the API server dials the kubelet afresh for every exec) with the
 * API server's kubelet client certificate, running `true`, timed from the dial to the
 * close that follows the exit status.
 *
 * Why beside `kubectl exec`: kubectl's start and the API server are about 60 ms of a
 * 100 ms exec and most of its noise on this machine, the same for both agents; left out,
 * a pair's difference is the agents' own.
 */
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import type { Cluster } from '../test/harness/cluster.ts';
import { kubectl, NAMESPACE } from './api-phases.ts';

/** Where one agent's exec goes, and the certificate it is sent with. */
export interface DirectExecTarget {
  readonly url: string;
  readonly key: Buffer;
  readonly cert: Buffer;
}

const ERROR_CHANNEL = 3;

/** The exec pod `${prefix}-exec` of benchPods on the agent that registered `nodeName`. */
export async function directExecTarget(
  cluster: Cluster,
  nodeName: string,
  prefix: string,
): Promise<DirectExecTarget> {
  const port = Number(
    (
      await kubectl(cluster, [
        'get',
        'node',
        nodeName,
        '-o',
        'jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}',
      ])
    ).trim(),
  );
  if (!Number.isInteger(port) || port <= 0)
    throw new Error(`Node ${nodeName} reports no kubelet port`);
  return {
    // The query the API server sends for `kubectl exec pod -- true`.
    url: `wss://127.0.0.1:${String(port)}/exec/${NAMESPACE}/${prefix}-exec/main?command=true&error=1&output=1`,
    key: await readFile(cluster.pki.kubeletClient.key),
    cert: await readFile(cluster.pki.kubeletClient.cert),
  };
}

/** One direct exec's times from the dial, in milliseconds. */
export interface DirectExecTimes {
  /** To the agent's 101: TLS, authentication, authorization and the CRI Exec call. */
  readonly upgradeMs: number;
  /** To the exit status on the error channel (the first of its messages). */
  readonly statusMs: number;
  /** To the close after the exit status. */
  readonly totalMs: number;
}

/** Times one direct exec; rejects unless the error channel carried a Success status. */
export function directExecOnce(target: DirectExecTarget): Promise<DirectExecTimes> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let upgradeMs = -1;
    let statusMs = -1;
    let status: string | undefined;
    const ws = new WebSocket(target.url, ['v5.channel.k8s.io'], {
      key: target.key,
      cert: target.cert,
      rejectUnauthorized: false,
      perMessageDeflate: false,
    });
    ws.on('upgrade', () => {
      upgradeMs = performance.now() - started;
    });
    ws.on('message', (data: Buffer) => {
      if (data[0] !== ERROR_CHANNEL) return;
      if (statusMs < 0) statusMs = performance.now() - started;
      status = (status ?? '') + data.subarray(1).toString();
    });
    ws.on('error', reject);
    ws.on('close', () => {
      const totalMs = performance.now() - started;
      if (status !== undefined && /"status":"Success"/.test(status))
        resolve({ upgradeMs, statusMs, totalMs });
      else reject(new Error(`direct exec at ${target.url}: status ${status ?? 'none'}`));
    });
  });
}
