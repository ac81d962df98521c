/**
 * Authentication and authorization of the kubelet API, with upstream's model: an x509
 * client certificate signed by authentication.x509.clientCAFile, else a bearer token
 * checked with TokenReview, else anonymous when enabled; then a SubjectAccessReview
 * (Webhook) or AlwaysAllow on resource nodes/<nodeName>/<subresource>.
 */
import { X509Certificate } from 'node:crypto';
import { TLSSocket } from 'node:tls';
import type { KubeClient, ResourcePath } from '../kube/types.ts';
import type { Clock } from '../util/clock.ts';
import { BerthError } from '../util/errors.ts';
import { connectionOf, type ApiRequest } from './transport.ts';

/** The identity a request was authenticated as. */
export interface UserInfo {
  readonly username: string;
  readonly uid: string;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** What an authorizer decides on: the node subresource and the verb. */
export interface Attributes {
  readonly user: UserInfo;
  readonly verb: string;
  readonly nodeName: string;
  readonly subresource: string;
}

/** The authorizer could not decide (API unreachable, bad answer): the request gets 500. */
export class AuthorizerError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BERTH_SERVER_AUTHORIZER_FAILED', message, options);
  }
}

const TOKEN_REVIEWS: ResourcePath = {
  group: 'authentication.k8s.io',
  version: 'v1',
  resource: 'tokenreviews',
};
const SUBJECT_ACCESS_REVIEWS: ResourcePath = {
  group: 'authorization.k8s.io',
  version: 'v1',
  resource: 'subjectaccessreviews',
};
const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

interface TokenReviewObject {
  apiVersion: 'authentication.k8s.io/v1';
  kind: 'TokenReview';
  spec: { token: string };
  status?: {
    authenticated?: boolean;
    user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  };
}

interface SubjectAccessReviewObject {
  apiVersion: 'authorization.k8s.io/v1';
  kind: 'SubjectAccessReview';
  spec: unknown;
  status?: { allowed?: boolean; denied?: boolean; reason?: string };
}

export interface AuthenticatorOptions {
  readonly kube: KubeClient;
  readonly clock: Clock;
  /** Whether a client CA is configured (the TLS layer verified the chain against it). */
  readonly x509Enabled: boolean;
  readonly webhookEnabled: boolean;
  readonly webhookCacheTTLMs: number;
  readonly anonymousEnabled: boolean;
}

/** A small TTL cache; entries are checked on read so no timer keeps the process alive. */
class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expires: number }>();
  readonly #clock: Clock;
  readonly #max: number;
  constructor(clock: Clock, max = 4096) {
    this.#clock = clock;
    this.#max = max;
  }
  get(key: string): V | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    if (e.expires <= this.#clock.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return e.value;
  }
  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0) return;
    // Bounded: a flood of distinct tokens must not grow memory without limit.
    if (this.#entries.size >= this.#max) this.#entries.clear();
    this.#entries.set(key, { value, expires: this.#clock.now() + ttlMs });
  }
}

/** What a connection's client certificate says; `user` only for a usable one. */
interface PeerCertificate {
  /** A certificate was presented, verified or not. */
  readonly presented: boolean;
  readonly user?: UserInfo;
  readonly notBefore: number;
  readonly notAfter: number;
}

/** What a verified client certificate names, decoded once per distinct certificate. */
type CertificateIdentity = Omit<PeerCertificate, 'presented'>;

/** Bounds the decoded certificates kept: a node sees a handful (the API server's, a few more). */
const MAX_DECODED_CERTIFICATES = 64;

function decodeIdentity(cert: X509Certificate): CertificateIdentity {
  const none = { notBefore: 0, notAfter: 0 };
  // keyUsage here is the extended key usage list; absent means "any".
  // (typed as always present, but undefined at run time when the extension is absent).
  const eku = cert.keyUsage as readonly string[] | undefined;
  if (eku !== undefined && !eku.includes(CLIENT_AUTH_OID)) return none;
  const subject = parseSubject(cert.subject);
  const cn = subject.get('CN')?.[0];
  if (cn === undefined || cn === '') return none;
  return {
    user: { username: cn, uid: '', groups: subject.get('O') ?? [], extra: {} },
    notBefore: Date.parse(cert.validFrom),
    notAfter: Date.parse(cert.validTo),
  };
}

function readPeer(
  socket: TLSSocket,
  x509Enabled: boolean,
  decoded: Map<string, CertificateIdentity>,
): PeerCertificate {
  // The X509Certificate straight from the connection: getPeerCertificate() builds a
  // plain object of every field first, and re-parsing its DER cost as much again.
  const cert = socket.getPeerX509Certificate();
  const presented = cert !== undefined;
  // The server's `ca` is the client CA and rejectUnauthorized is false, so a peer
  // certificate is present but `authorized` is true only if its chain verified.
  if (!x509Enabled || cert === undefined || !socket.authorized)
    return { presented, notBefore: 0, notAfter: 0 };
  // The API server opens a connection per exec, attach and port-forward, always with the
  // same certificate: what it names is decoded once. The chain was verified above, for
  // this connection; the identity depends only on the certificate's bytes.
  const key = cert.fingerprint256;
  let identity = decoded.get(key);
  if (identity === undefined) {
    identity = decodeIdentity(cert);
    if (decoded.size >= MAX_DECODED_CERTIFICATES) decoded.clear();
    decoded.set(key, identity);
  }
  return { presented, ...identity };
}

/** Authenticates a request; undefined means 401. */
export class Authenticator {
  readonly #o: AuthenticatorOptions;
  readonly #tokens: TtlCache<UserInfo | null>;
  readonly #peers = new WeakMap<TLSSocket, PeerCertificate>();
  readonly #decoded = new Map<string, CertificateIdentity>();

  constructor(options: AuthenticatorOptions) {
    this.#o = options;
    this.#tokens = new TtlCache(options.clock);
  }

  async authenticate(req: ApiRequest, signal?: AbortSignal): Promise<UserInfo | undefined> {
    const socket = connectionOf(req);
    const peer = socket instanceof TLSSocket ? this.#peer(socket) : undefined;
    const fromCert = peer === undefined ? undefined : this.#x509(peer);
    if (fromCert !== undefined) return fromCert;
    const header = req.headers.authorization;
    if (header !== undefined && this.#o.webhookEnabled) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (match?.[1] !== undefined) {
        const user = await this.#tokenReview(match[1], signal);
        if (user !== undefined) return user;
      }
    }
    // Anonymous is for requests that presented nothing: a rejected certificate or token
    // is a 401, as upstream's authenticator chain ends on the first error.
    if (this.#o.anonymousEnabled && header === undefined && peer?.presented !== true) {
      return {
        username: 'system:anonymous',
        uid: '',
        groups: ['system:unauthenticated'],
        extra: {},
      };
    }
    return undefined;
  }

  /**
   * The connection's client certificate, read once per connection: the API server keeps
   * its connections to the kubelet open, and decoding the certificate again for every
   * request was a fifth of a logs request's CPU. The certificate cannot change under a
   * connection, as the server refuses TLS renegotiation (KubeletServer).
   */
  #peer(socket: TLSSocket): PeerCertificate {
    const known = this.#peers.get(socket);
    if (known !== undefined) return known;
    const peer = readPeer(socket, this.#o.x509Enabled, this.#decoded);
    this.#peers.set(socket, peer);
    return peer;
  }

  #x509(peer: PeerCertificate): UserInfo | undefined {
    if (peer.user === undefined) return undefined;
    const now = Date.now();
    if (now < peer.notBefore || now > peer.notAfter) return undefined;
    return peer.user;
  }

  async #tokenReview(token: string, signal?: AbortSignal): Promise<UserInfo | undefined> {
    const cached = this.#tokens.get(token);
    if (cached !== undefined) return cached ?? undefined;
    let answer: TokenReviewObject;
    try {
      answer = await this.#o.kube.create<TokenReviewObject>(
        TOKEN_REVIEWS,
        { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
        signal === undefined ? {} : { signal },
      );
    } catch {
      // An unreachable API server fails closed (401) and is not cached.
      return undefined;
    }
    const u = answer.status?.user;
    const user =
      answer.status?.authenticated === true && u?.username !== undefined
        ? { username: u.username, uid: u.uid ?? '', groups: u.groups ?? [], extra: u.extra ?? {} }
        : null;
    this.#tokens.set(token, user, this.#o.webhookCacheTTLMs);
    return user ?? undefined;
  }
}

/** `CN=a\nO=b\nO=c` (node's X509Certificate.subject) as a multimap. */
function parseSubject(subject: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of subject.split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    const values = out.get(key) ?? [];
    values.push(line.slice(eq + 1));
    out.set(key, values);
  }
  return out;
}

/** Decides whether an authenticated user may do something on this node. */
export interface Authorizer {
  /** Resolves true (allowed) or false (denied); rejects with AuthorizerError. */
  authorize(attrs: Attributes, signal?: AbortSignal): Promise<boolean>;
}

/** authorization.mode AlwaysAllow. */
export const alwaysAllow: Authorizer = {
  authorize: () => Promise.resolve(true),
};

export interface WebhookAuthorizerOptions {
  readonly kube: KubeClient;
  readonly clock: Clock;
  readonly allowedTTLMs: number;
  readonly deniedTTLMs: number;
}

/** authorization.mode Webhook: SubjectAccessReview, allowed and denied answers cached. */
export class WebhookAuthorizer implements Authorizer {
  readonly #o: WebhookAuthorizerOptions;
  readonly #cache: TtlCache<boolean>;

  constructor(options: WebhookAuthorizerOptions) {
    this.#o = options;
    this.#cache = new TtlCache(options.clock);
  }

  async authorize(attrs: Attributes, signal?: AbortSignal): Promise<boolean> {
    const spec = {
      user: attrs.user.username,
      uid: attrs.user.uid,
      groups: [...attrs.user.groups],
      extra: attrs.user.extra,
      resourceAttributes: {
        verb: attrs.verb,
        group: '',
        version: 'v1',
        resource: 'nodes',
        subresource: attrs.subresource,
        name: attrs.nodeName,
      },
    };
    const key = JSON.stringify(spec);
    const cached = this.#cache.get(key);
    if (cached !== undefined) return cached;
    let answer: SubjectAccessReviewObject;
    try {
      answer = await this.#o.kube.create<SubjectAccessReviewObject>(
        SUBJECT_ACCESS_REVIEWS,
        { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec },
        signal === undefined ? {} : { signal },
      );
    } catch (err) {
      throw new AuthorizerError(
        `Cannot authorize ${attrs.user.username} to ${attrs.verb} nodes/${attrs.subresource}: the SubjectAccessReview failed`,
        { cause: err },
      );
    }
    const allowed = answer.status?.allowed === true;
    this.#cache.set(key, allowed, allowed ? this.#o.allowedTTLMs : this.#o.deniedTTLMs);
    return allowed;
  }
}

/** The upstream verb for an HTTP method; undefined for methods the kubelet has no use for. */
export function verbFor(method: string, isWebSocketStream: boolean): string | undefined {
  // A WebSocket handshake is a GET, but it starts a command: authorize it as create,
  // or a user who may only read nodes/proxy could exec.
  if (isWebSocketStream) return 'create';
  switch (method) {
    case 'GET':
    case 'HEAD':
      return 'get';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    default:
      return undefined;
  }
}

/**
 * The subresources to try, in order, for a path: stats, metrics and logs have their own;
 * pods, healthz and configz try the fine-grained one first, then proxy; the rest proxy.
 */
export function subresourcesFor(pathname: string): readonly string[] {
  const first = pathname.split('/')[1] ?? '';
  switch (first) {
    case 'stats':
      return ['stats'];
    case 'metrics':
      return ['metrics'];
    case 'logs':
      return ['log'];
    case 'pods':
    case 'runningpods':
      return ['pods', 'proxy'];
    case 'healthz':
      return ['healthz', 'proxy'];
    case 'configz':
      return ['configz', 'proxy'];
    default:
      return ['proxy'];
  }
}
