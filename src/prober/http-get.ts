/**
 * One HTTP GET as the kubelet sends it for httpGet probes and lifecycle hooks: the
 * kube-<purpose> user agent, `Accept: *\/*`, the pod's headers, no certificate checks,
 * no keep-alive, at most 10 KiB of the body read, and upstream's redirect policy:
 * redirects to the same host name are followed (up to 10), a redirect to another host
 * is not followed and its 3xx response is the answer.
 */
import { BerthError } from '../util/errors.ts';
import { requestOnce, type RawResponse } from './http-request.ts';
import { isPlaintextAnswer, NetError } from './net-error.ts';

export { MAX_BODY_BYTES } from './http-request.ts';
/** Go's http.Client stops after 10 redirects. */
const MAX_REDIRECTS = 10;
/** The statuses Go's client follows when they carry a Location. */
const REDIRECT_CODES = new Set([301, 302, 303, 307, 308]);
/** The minor version berth answers for, as in the kubelet's kube-probe/1.37. */
const KUBE_VERSION = '1.37';

export interface HttpGetTarget {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly headers: readonly { readonly name: string; readonly value: string }[];
}

export interface HttpGetResponse {
  readonly statusCode: number;
  /** At most MAX_BODY_BYTES of the body, as UTF-8. */
  readonly body: string;
  /** The URL that gave this response (the last one after redirects). */
  readonly url: string;
  /** The response is a redirect to another host, which was not followed. */
  readonly redirectNotFollowed: boolean;
}

/**
 * The request could not complete (connection, TLS, protocol, redirect loop). The
 * message is shaped like Go's url.Error (`Get "<url>": <cause>`), which is what the
 * kubelet's events show. `plaintextAnswer` marks a TLS handshake answered by a
 * plain-text server, the case where lifecycle hooks fall back to HTTP.
 */
export class HttpGetError extends BerthError {
  readonly plaintextAnswer: boolean;
  constructor(message: string, options: { cause?: unknown; plaintextAnswer?: boolean } = {}) {
    super('BERTH_HTTP_GET_FAILED', message, { cause: options.cause });
    this.plaintextAnswer = options.plaintextAnswer ?? false;
  }
}

/** `http://host:port/path`, with IPv6 hosts bracketed and the path given a leading slash. */
export function formatUrl(t: Pick<HttpGetTarget, 'scheme' | 'host' | 'port' | 'path'>): string {
  const host = t.host.includes(':') && !t.host.startsWith('[') ? `[${t.host}]` : t.host;
  const path = t.path.startsWith('/') ? t.path : `/${t.path}`;
  return `${t.scheme}://${host}:${t.port}${path}`;
}

/** The headers of the first request: defaults, then the pod's (which may override them). */
function requestHeaders(t: HttpGetTarget, purpose: 'probe' | 'lifecycle'): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const h of t.headers) headers[h.name.toLowerCase()] = h.value;
  headers['user-agent'] ??= `kube-${purpose}/${KUBE_VERSION}`;
  // An explicitly empty Accept removes the header, as upstream does.
  if (headers['accept'] === undefined) headers['accept'] = '*/*';
  else if (headers['accept'] === '') delete headers['accept'];
  return headers;
}

function answer(res: RawResponse, url: URL, redirectNotFollowed: boolean): HttpGetResponse {
  return { statusCode: res.statusCode, body: res.body, url: url.href, redirectNotFollowed };
}

/**
 * Sends the GET and follows same-host redirects. Resolves with any HTTP answer
 * (classifying status codes is the caller's business); rejects with HttpGetError
 * when no answer came, or with the signal's reason when `signal` aborted.
 */
export async function httpGet(
  target: HttpGetTarget,
  purpose: 'probe' | 'lifecycle',
  signal: AbortSignal,
): Promise<HttpGetResponse> {
  const first = new URL(formatUrl(target));
  const headers = requestHeaders(target, purpose);
  const customHost = headers['host'];
  let url = first;
  for (let redirects = 0; ; redirects++) {
    let res: RawResponse;
    try {
      res = await requestOnce(url, headers, signal);
    } catch (err) {
      signal.throwIfAborted();
      throw new HttpGetError(`Get "${url.href}": ${(err as Error).message}`, {
        cause: err,
        plaintextAnswer:
          url.protocol === 'https:' && err instanceof NetError && isPlaintextAnswer(err.cause),
      });
    }
    const redirect = REDIRECT_CODES.has(res.statusCode) ? res.location : undefined;
    if (redirect === undefined || redirect === '') return answer(res, url, false);
    let next: URL;
    try {
      next = new URL(redirect, url);
    } catch (err) {
      throw new HttpGetError(`Get "${url.href}": failed to parse Location header`, { cause: err });
    }
    // Upstream compares host names only: another port on the same host is followed.
    if (next.hostname.toLowerCase() !== first.hostname.toLowerCase()) return answer(res, url, true);
    if (redirects + 1 >= MAX_REDIRECTS)
      throw new HttpGetError(`Get "${next.href}": stopped after ${MAX_REDIRECTS} redirects`);
    // As Go's client: a custom Host header survives only a relative redirect.
    if (customHost !== undefined && /^[a-z][a-z0-9+.-]*:/i.test(redirect)) delete headers['host'];
    url = next;
  }
}
