/** What the kubelet API server is configured with and given (server.ts serves them). */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { CriClient } from '../cri/index.ts';
import type { KubeClient } from '../kube/types.ts';
import type { KubeletMetrics } from '../metrics/registry.ts';
import type { RuntimeCache } from '../pleg/types.ts';
import type { StatsProvider } from '../stats/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger, LogVerbosity } from '../util/logger.ts';

export interface KubeletServerOptions {
  readonly nodeName: string;
  readonly address: string;
  /** 0 picks a free port (tests). */
  readonly port: number;
  readonly healthzAddress: string;
  /** 0 disables healthz. */
  readonly healthzPort: number;
  /**
   * readOnlyPort: plain HTTP on `address`, no authentication, serving only /healthz,
   * /pods, /stats and /metrics (as upstream's). 0 or absent disables it.
   */
  readonly readOnlyPort?: number;
  /** Idle streams (exec, attach, port-forward) are closed after this; 0 never. */
  readonly streamingConnectionIdleTimeoutMs?: number;
  /** Serving certificate files; unused when the deps give a rotating certificate source. */
  readonly tlsCertFile: string | null;
  readonly tlsPrivateKeyFile: string | null;
  /** tlsMinVersion: TLS 1.2 (the default, and the least berth serves) or 1.3. */
  readonly tlsMinVersion?: 'TLSv1.2' | 'TLSv1.3';
  readonly clientCAFile: string | null;
  readonly webhookAuthentication: boolean;
  readonly authenticationCacheTTLMs: number;
  readonly anonymous: boolean;
  readonly authorizationMode: 'AlwaysAllow' | 'Webhook';
  readonly authorizedTTLMs: number;
  readonly unauthorizedTTLMs: number;
  readonly podLogsDir: string;
  /** enableDebuggingHandlers: false leaves out logs, exec, attach, portForward, runningpods. */
  readonly debuggingHandlers: boolean;
  /** The effective KubeletConfiguration (v1beta1, as JSON) /configz shows; absent: 404. */
  readonly configz?: unknown;
  /** PUT /debug/flags/v sets it (enableDebugFlagsHandler); absent: the disabled endpoint. */
  readonly debugFlags?: LogVerbosity;
  /** enableSystemLogHandler: false leaves out /logs/ (default true). */
  readonly systemLogHandler?: boolean;
  /** The directory /logs/ serves (default /var/log). */
  readonly nodeLogsDir?: string;
  /** enableSystemLogQuery (with the NodeLogQuery gate): /logs/?query= (default false). */
  readonly systemLogQuery?: boolean;
  /** The journalctl executable node log queries run (default `journalctl` from PATH). */
  readonly journalctl?: string;
}

export interface KubeletServerDeps {
  readonly kube: KubeClient;
  readonly cri: CriClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly pods: () => ReadonlyMap<string, Pod>;
  /** The PLEG's view of the runtime: exec and attach find their container there first. */
  readonly runtimeCache?: RuntimeCache;
  /** Serves /metrics and /metrics/probes and counts requests; absent: those routes 404. */
  readonly metrics?: KubeletMetrics;
  /** Serves /stats/summary and /metrics/resource; absent: 404 / resource_scrape_error 1. */
  readonly stats?: StatsProvider;
  /** The syncloop healthz check: why the sync loop is unhealthy, else undefined. */
  readonly syncLoopHealth?: () => string | undefined;
  /**
   * A rotating serving certificate (serverTLSBootstrap). Until it has one the listener
   * completes no handshake, rather than serve an untrusted self-signed certificate.
   */
  readonly certificate?: ServingCertificateSource;
}

export interface ServingCertificateSource {
  current(): { readonly certPem: string; readonly keyPem: string } | undefined;
  /** Calls `cb` after each rotation; returns a function that unsubscribes. */
  onRotate(cb: () => void): () => void;
}

export type KubeletServerState = 'NEW' | 'RUNNING' | 'STOPPED';
