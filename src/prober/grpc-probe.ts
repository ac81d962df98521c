/**
 * gRPC probes: one grpc.health.v1.Health/Check over plaintext to the pod IP and port,
 * with the probe timeout as the deadline of connecting and calling together. SERVING
 * passes; every other answer or error fails with upstream's wording.
 *
 * The two health messages are one field each, so they are encoded by hand instead of
 * pulling in a protobuf runtime: HealthCheckRequest { string service = 1; } and
 * HealthCheckResponse { ServingStatus status = 1; }.
 */
import { Client, connectivityState, credentials, Metadata, status } from '@grpc/grpc-js';
import { formatGoDuration } from '../config/duration.ts';

const CHECK = '/grpc.health.v1.Health/Check';
/** How early a server-side cancel may come and still count as the deadline. */
const DEADLINE_SLACK_MS = 100;

/** HealthCheckResponse.ServingStatus names by number. */
const SERVING_STATUS = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'] as const;

export interface GrpcProbeOutcome {
  readonly result: 'success' | 'failure';
  readonly output: string;
}

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** HealthCheckRequest: field 1 (length-delimited) only when the service is not empty. */
export function encodeHealthCheckRequest(service: string): Buffer {
  if (service === '') return Buffer.alloc(0);
  const bytes = Buffer.from(service, 'utf8');
  return Buffer.concat([Buffer.from([0x0a, ...varint(bytes.length)]), bytes]);
}

function readVarint(buf: Buffer, at: number): [value: number, next: number] {
  let value = 0;
  let scale = 1;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    const b = buf[i] ?? 0;
    value += (b & 0x7f) * scale;
    scale *= 128;
    if ((b & 0x80) === 0) return [value, i + 1];
  }
  throw new Error('truncated varint in HealthCheckResponse');
}

/** The status number of a HealthCheckResponse (0, UNKNOWN, when absent); skips other fields. */
export function decodeHealthCheckResponse(buf: Buffer): number {
  let statusValue = 0;
  let at = 0;
  while (at < buf.length) {
    const [key, afterKey] = readVarint(buf, at);
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) {
      const [value, next] = readVarint(buf, afterKey);
      if (field === 1) statusValue = value;
      at = next;
    } else if (wire === 2) {
      const [len, next] = readVarint(buf, afterKey);
      at = next + len;
    } else if (wire === 1) at = afterKey + 8;
    else if (wire === 5) at = afterKey + 4;
    else throw new Error(`unsupported wire type ${wire} in HealthCheckResponse`);
  }
  if (at > buf.length) throw new Error('truncated HealthCheckResponse');
  return statusValue;
}

/** `host:port`, bracketing IPv6 literals. */
function address(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Runs one health check. Resolves with the outcome (never rejects for a failed probe);
 * rejects with the signal's reason when `signal` aborts.
 */
export async function grpcProbe(
  target: { readonly host: string; readonly port: number; readonly service: string },
  timeoutSeconds: number,
  signal: AbortSignal,
): Promise<GrpcProbeOutcome> {
  signal.throwIfAborted();
  const addr = address(target.host, target.port);
  const timeout = formatGoDuration(timeoutSeconds * 1000);
  const client = new Client(addr, credentials.createInsecure(), {
    'grpc.primary_user_agent': 'kube-probe/1.37',
    // A connection of its own, closed with the client: upstream dials per probe, and a
    // shared pooled connection would outlive the probe and hide a server that stopped
    // accepting new connections.
    'grpc.use_local_subchannel_pool': 1,
    'grpc.enable_retries': 0,
    'grpc.service_config_disable_resolution': 1,
  });
  const deadline = Date.now() + timeoutSeconds * 1000;
  try {
    return await new Promise<GrpcProbeOutcome>((resolve, reject) => {
      const call = client.makeUnaryRequest(
        CHECK,
        encodeHealthCheckRequest,
        (b: Buffer) => b,
        target.service,
        new Metadata(),
        { deadline: new Date(deadline) },
        (err, res) => {
          signal.removeEventListener('abort', onAbort);
          if (signal.aborted) {
            reject(signal.reason as Error);
            return;
          }
          if (err !== null || res === undefined) {
            const code = err?.code ?? status.UNKNOWN;
            // grpc-js appends an empty "Resolution note: " to connection errors.
            const details = (err?.details ?? 'no response').replace(/\s*Resolution note:\s*$/, '');
            // Tell "never connected" from "connected but no answer in time", as upstream.
            const connected =
              client.getChannel().getConnectivityState(false) === connectivityState.READY;
            // A Go server resets the stream at its copy of the deadline (CANCEL), which
            // can arrive just before our own timer fires: that is the timeout too.
            const timedOut =
              code === status.DEADLINE_EXCEEDED ||
              (code === status.CANCELLED && Date.now() >= deadline - DEADLINE_SLACK_MS);
            if (timedOut)
              resolve(
                connected
                  ? failure(`timeout: health rpc did not complete within ${timeout}`)
                  : failure(
                      `timeout: failed to connect service "${addr}" within ${timeout}: ${details}`,
                    ),
              );
            else if (code === status.UNAVAILABLE && !connected)
              resolve(failure(`error: failed to connect service at "${addr}": ${details}`));
            else if (code === status.UNIMPLEMENTED)
              resolve(
                failure(
                  `error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${details}`,
                ),
              );
            else
              resolve(
                failure(
                  `error: health rpc probe failed: rpc error: code = ${statusName(code)} desc = ${details}`,
                ),
              );
            return;
          }
          let value: number;
          try {
            value = decodeHealthCheckResponse(res);
          } catch (decodeErr) {
            resolve(failure(`error: health rpc probe failed: ${(decodeErr as Error).message}`));
            return;
          }
          resolve(
            value === 1
              ? { result: 'success', output: 'service healthy' }
              : failure(
                  `service unhealthy (responded with "${SERVING_STATUS[value] ?? String(value)}")`,
                ),
          );
        },
      );
      const onAbort = (): void => {
        call.cancel();
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  } finally {
    client.close();
  }
}

function failure(output: string): GrpcProbeOutcome {
  return { result: 'failure', output };
}

/** Go's codes.Code names, from grpc-js's numeric enum (which maps numbers back to names). */
function statusName(code: number): string {
  const name = (status as unknown as Record<number, string | undefined>)[code] ?? String(code);
  // grpc-js spells them SCREAMING_CASE; Go prints CamelCase (e.g. PermissionDenied).
  return name
    .toLowerCase()
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');
}
