/**
 * Socket errors worded as Go's net package words them, because that is what the
 * upstream kubelet's probe and hook events show and what operators search for:
 * `dial tcp 10.0.0.5:8080: connect: connection refused`, not Node's
 * `connect ECONNREFUSED 10.0.0.5:8080`.
 */
import { BerthError } from '../util/errors.ts';

/** Linux's strerror texts for the errors a dial or a read meets, lower-cased as Go has them. */
const ERRNO_TEXT: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by peer',
  ECONNABORTED: 'software caused connection abort',
  EHOSTUNREACH: 'no route to host',
  ENETUNREACH: 'network is unreachable',
  ETIMEDOUT: 'connection timed out',
  EPIPE: 'broken pipe',
  EADDRNOTAVAIL: 'cannot assign requested address',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
};

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** host:port as Go's net.JoinHostPort writes it (IPv6 in brackets). */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

interface NodeSystemError {
  readonly code?: unknown;
  readonly syscall?: unknown;
  readonly message?: unknown;
}

/** OpenSSL's complaint when the first bytes of the "handshake" are an HTTP response. */
export function isPlaintextAnswer(err: unknown): boolean {
  const e = (err ?? {}) as NodeSystemError;
  return (
    e.code === 'ERR_SSL_WRONG_VERSION_NUMBER' ||
    (e.code === 'EPROTO' && typeof e.message === 'string' && /wrong version number/.test(e.message))
  );
}

/**
 * Go's text for `err`, a socket's error while dialling `remote` or talking to it from
 * `local`. Errors Go words differently than this table knows keep Node's message.
 */
export function goNetErrorText(err: unknown, remote: Endpoint, local?: Endpoint): string {
  const e = (err ?? {}) as NodeSystemError;
  const code = typeof e.code === 'string' ? e.code : '';
  const fallback = typeof e.message === 'string' ? e.message : String(err);
  if (isPlaintextAnswer(err)) return 'http: server gave HTTP response to HTTPS client';
  if (code === 'ENOTFOUND') return `dial tcp: lookup ${remote.host}: no such host`;
  const text = ERRNO_TEXT[code];
  if (text === undefined) return fallback;
  const to = joinHostPort(remote.host, remote.port);
  switch (e.syscall) {
    case 'connect':
      return `dial tcp ${to}: connect: ${text}`;
    case 'read':
    case 'write': {
      const from = local === undefined ? '' : `${joinHostPort(local.host, local.port)}->`;
      return `${e.syscall} tcp ${from}${to}: ${e.syscall}: ${text}`;
    }
    default:
      return fallback;
  }
}

/** A socket error, its message in Go's words; the Node error is the cause. */
export class NetError extends BerthError {
  constructor(err: unknown, remote: Endpoint, local?: Endpoint) {
    super('BERTH_NET_ERROR', goNetErrorText(err, remote, local), { cause: err });
  }
}
