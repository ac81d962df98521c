/**
 * The command-line flags that set a KubeletConfiguration field (upstream's flag
 * precedence: they override the file), with their types, defaults and the field each
 * sets; kubelet-flags.ts adds the per-node flags that exist only on the command line.
 */
import { applyDefaults } from './defaults.ts';
import {
  boolFlag,
  colonMultimapFlag,
  durationDefault,
  durationFlag,
  enumFlag,
  intFlag,
  listFlag,
  mapFlag,
  stringFlag,
  type FlagSpec,
} from './flags.ts';
import { checkIP, parseTaint } from './names.ts';
import { isQuantity } from '../util/quantity.ts';
import type { KubeletConfig } from './types.ts';

/** A flag that sets a KubeletConfiguration field. */
export interface ConfigFlag<T> extends FlagSpec<T> {
  /** The field as the file spells it, e.g. "maxPods", "logging.verbosity". */
  readonly field: string;
  /** The configuration with this flag's value applied. */
  apply(config: KubeletConfig, value: T): KubeletConfig;
}

const D = applyDefaults(null);

/** Binds a flag to a configuration field; deprecated unless told otherwise, as upstream. */
function bind<T>(
  spec: FlagSpec<T>,
  field: string,
  apply: (config: KubeletConfig, value: T) => KubeletConfig,
  options: { readonly deprecated?: false } = {},
): ConfigFlag<T> {
  return {
    ...spec,
    ...(options.deprecated === false
      ? {}
      : { deprecated: `set ${field} in the --config file instead` }),
    field,
    apply,
  };
}

const orNull = (v: string): string | null => (v === '' ? null : v);

/** Throws the reason when `check` finds one: list and map items report this way. */
function orThrow(why: string | null): void {
  if (why !== null) throw new Error(why);
}

function ipItem(text: string): string {
  orThrow(checkIP(text));
  return text;
}

function quantityValue(text: string, key: string): string {
  if (!isQuantity(text)) throw new Error(`invalid quantity ${JSON.stringify(text)} for ${key}`);
  return text;
}

const boolWord = boolFlag('');

export function boolValue(text: string): boolean {
  return boolWord.parse(text, undefined);
}

/** The flags bound to KubeletConfiguration fields, by upstream name. */
export const CONFIG_FLAGS = {
  v: bind(
    intFlag('Log verbosity (klog levels: 0-3 info, 4 and up debug).', {
      min: 0,
      shorthand: 'v',
      defaultText: String(D.logging.verbosity),
    }),
    'logging.verbosity',
    (c, v) => ({ ...c, logging: { ...c.logging, verbosity: v } }),
    { deprecated: false },
  ),
  'logging-format': bind(
    enumFlag('Log format.', ['text', 'json'], { defaultText: D.logging.format }),
    'logging.format',
    (c, v) => ({ ...c, logging: { ...c.logging, format: v } }),
  ),
  'container-runtime-endpoint': bind(
    stringFlag('The CRI runtime socket, e.g. unix:///run/containerd/containerd.sock.', {
      defaultText: D.containerRuntimeEndpoint,
    }),
    'containerRuntimeEndpoint',
    (c, v) => ({ ...c, containerRuntimeEndpoint: v }),
  ),
  'image-service-endpoint': bind(
    stringFlag('The CRI image service socket, when it differs from --container-runtime-endpoint.'),
    'imageServiceEndpoint',
    (c, v) => ({ ...c, imageServiceEndpoint: orNull(v) }),
  ),
  'register-node': bind(
    boolFlag('Register the node with the API server.', { defaultText: String(D.registerNode) }),
    'registerNode',
    (c, v) => ({ ...c, registerNode: v }),
  ),
  'register-with-taints': bind(
    listFlag(
      'Taints to register the node with, as key=value:Effect separated by ",".',
      parseTaint,
      {
        typeName: 'taints',
        repeat: 'replace',
      },
    ),
    'registerWithTaints',
    (c, v) => ({ ...c, registerWithTaints: v }),
  ),
  'max-pods': bind(
    intFlag('Most pods this node runs.', { defaultText: String(D.maxPods) }),
    'maxPods',
    (c, v) => ({ ...c, maxPods: v }),
  ),
  'cgroup-root': bind(
    stringFlag('Root cgroup for pods (the runtime default when empty).'),
    'cgroupRoot',
    (c, v) => ({ ...c, cgroupRoot: orNull(v) }),
  ),
  'cgroup-driver': bind(
    enumFlag('Cgroup driver.', ['cgroupfs', 'systemd'], { defaultText: D.cgroupDriver }),
    'cgroupDriver',
    (c, v) => ({ ...c, cgroupDriver: v }),
  ),
  'cgroups-per-qos': bind(
    boolFlag('Create the QoS and pod cgroup hierarchy.', { defaultText: String(D.cgroupsPerQOS) }),
    'cgroupsPerQOS',
    (c, v) => ({ ...c, cgroupsPerQOS: v }),
  ),
  'cluster-dns': bind(
    listFlag(
      'DNS server IP addresses for pods with dnsPolicy ClusterFirst, separated by ",".',
      ipItem,
    ),
    'clusterDNS',
    (c, v) => ({ ...c, clusterDNS: v }),
  ),
  'cluster-domain': bind(
    stringFlag('Cluster DNS domain, added to pod search paths.'),
    'clusterDomain',
    (c, v) => ({ ...c, clusterDomain: orNull(v) }),
  ),
  'fail-swap-on': bind(
    boolFlag('Refuse to start when swap is on.', { defaultText: String(D.failSwapOn) }),
    'failSwapOn',
    (c, v) => ({ ...c, failSwapOn: v }),
  ),
  'fail-cgroupv1': bind(
    boolFlag('Refuse to start on a cgroup v1 host (berth honours it only when set).', {
      defaultText: 'unset',
    }),
    'failCgroupV1',
    (c, v) => ({ ...c, failCgroupV1: v }),
  ),
  'runtime-request-timeout': bind(
    durationFlag('Deadline of CRI calls other than pulls, logs, exec and attach.', {
      defaultText: durationDefault(D.runtimeRequestTimeoutMs),
    }),
    'runtimeRequestTimeout',
    (c, v) => ({ ...c, runtimeRequestTimeoutMs: v }),
  ),
  'provider-id': bind(
    stringFlag('Unique ID of the node in the machine database (cloud provider).'),
    'providerID',
    (c, v) => ({ ...c, providerID: orNull(v) }),
    { deprecated: false },
  ),
  'pod-manifest-path': bind(
    stringFlag('Directory of static pod manifests, or a single manifest file.'),
    'staticPodPath',
    (c, v) => ({ ...c, staticPodPath: orNull(v) }),
  ),
  'manifest-url': bind(
    stringFlag('URL for accessing additional pod specifications to run.'),
    'staticPodURL',
    (c, v) => ({ ...c, staticPodURL: orNull(v) }),
  ),
  'manifest-url-header': bind(
    colonMultimapFlag(
      "Comma-separated list of HTTP headers to use when accessing the url provided to --manifest-url, e.g. 'a:hello,b:again'; repeatable, values of one name kept in order.",
    ),
    'staticPodURLHeader',
    (c, v) => ({ ...c, staticPodURLHeader: v }),
  ),
  'http-check-frequency': bind(
    durationFlag('How often the static pod URL is read again.', {
      defaultText: durationDefault(D.httpCheckFrequencyMs),
    }),
    'httpCheckFrequency',
    (c, v) => ({ ...c, httpCheckFrequencyMs: v }),
  ),
  'node-status-update-frequency': bind(
    durationFlag('How often node status is computed (and posted when it changed).', {
      defaultText: durationDefault(D.nodeStatusUpdateFrequencyMs),
    }),
    'nodeStatusUpdateFrequency',
    (c, v) => ({ ...c, nodeStatusUpdateFrequencyMs: v }),
  ),
  'sync-frequency': bind(
    durationFlag('Most time between two syncs of a running pod.', {
      defaultText: durationDefault(D.syncFrequencyMs),
    }),
    'syncFrequency',
    (c, v) => ({ ...c, syncFrequencyMs: v }),
  ),
  'file-check-frequency': bind(
    durationFlag('How often the static pod directory is re-read.', {
      defaultText: durationDefault(D.fileCheckFrequencyMs),
    }),
    'fileCheckFrequency',
    (c, v) => ({ ...c, fileCheckFrequencyMs: v }),
  ),
  'feature-gates': bind(
    mapFlag('Feature gates as Name=true|false pairs separated by ",".', boolValue, {
      typeName: 'mapStringBool',
    }),
    'featureGates',
    // Upstream merges: gates from the file stay unless the flag names them.
    (c, v) => ({ ...c, featureGates: { ...c.featureGates, ...v } }),
  ),
  'anonymous-auth': bind(
    boolFlag('Serve anonymous requests (as system:anonymous) to the kubelet API.', {
      defaultText: String(D.authentication.anonymous.enabled),
    }),
    'authentication.anonymous.enabled',
    (c, v) => ({
      ...c,
      authentication: { ...c.authentication, anonymous: { enabled: v } },
    }),
  ),
  'authentication-token-webhook': bind(
    boolFlag('Check bearer tokens with the TokenReview API.', {
      defaultText: String(D.authentication.webhook.enabled),
    }),
    'authentication.webhook.enabled',
    (c, v) => ({
      ...c,
      authentication: {
        ...c.authentication,
        webhook: { ...c.authentication.webhook, enabled: v },
      },
    }),
  ),
  'client-ca-file': bind(
    stringFlag('CA bundle that authenticates client certificates.'),
    'authentication.x509.clientCAFile',
    (c, v) => ({
      ...c,
      authentication: { ...c.authentication, x509: { clientCAFile: orNull(v) } },
    }),
  ),
  'authorization-mode': bind(
    enumFlag('Authorization of kubelet API requests.', ['AlwaysAllow', 'Webhook'], {
      defaultText: D.authorization.mode,
    }),
    'authorization.mode',
    (c, v) => ({ ...c, authorization: { ...c.authorization, mode: v } }),
  ),
  'tls-cert-file': bind(
    stringFlag('Serving certificate (with intermediates); self-signed into --cert-dir when unset.'),
    'tlsCertFile',
    (c, v) => ({ ...c, tlsCertFile: orNull(v) }),
  ),
  'tls-private-key-file': bind(
    stringFlag('Private key of --tls-cert-file.'),
    'tlsPrivateKeyFile',
    (c, v) => ({ ...c, tlsPrivateKeyFile: orNull(v) }),
  ),
  'rotate-certificates': bind(
    boolFlag('Rotate the client certificate through the certificates API.', {
      defaultText: String(D.rotateCertificates),
    }),
    'rotateCertificates',
    (c, v) => ({ ...c, rotateCertificates: v }),
  ),
  'rotate-server-certificates': bind(
    boolFlag('Request and rotate the serving certificate through the certificates API.', {
      defaultText: String(D.serverTLSBootstrap),
    }),
    'serverTLSBootstrap',
    (c, v) => ({ ...c, serverTLSBootstrap: v }),
  ),
  address: bind(
    stringFlag('IP address the kubelet API listens on.', { defaultText: D.address }),
    'address',
    (c, v) => ({ ...c, address: v }),
  ),
  port: bind(
    intFlag('Port of the kubelet API.', { defaultText: String(D.port) }),
    'port',
    (c, v) => ({ ...c, port: v }),
  ),
  'read-only-port': bind(
    intFlag('Unauthenticated read-only port (0 disables it).', {
      defaultText: String(D.readOnlyPort),
    }),
    'readOnlyPort',
    (c, v) => ({ ...c, readOnlyPort: v }),
  ),
  'streaming-connection-idle-timeout': bind(
    durationFlag('Most time an exec, attach or port-forward stream may be idle (0: no limit).', {
      defaultText: durationDefault(D.streamingConnectionIdleTimeoutMs),
    }),
    'streamingConnectionIdleTimeout',
    (c, v) => ({ ...c, streamingConnectionIdleTimeoutMs: v }),
  ),
  'healthz-port': bind(
    intFlag('Port of the localhost healthz endpoint (0 disables it).', {
      defaultText: String(D.healthzPort),
    }),
    'healthzPort',
    (c, v) => ({ ...c, healthzPort: v }),
  ),
  'healthz-bind-address': bind(
    stringFlag('IP address of the healthz endpoint.', { defaultText: D.healthzBindAddress }),
    'healthzBindAddress',
    (c, v) => ({ ...c, healthzBindAddress: v }),
  ),
  'serialize-image-pulls': bind(
    boolFlag('Pull one image at a time.', { defaultText: String(D.serializeImagePulls) }),
    'serializeImagePulls',
    (c, v) => ({ ...c, serializeImagePulls: v }),
  ),
  'system-reserved': bind(
    mapFlag('Resources reserved for the system, e.g. cpu=200m,memory=500Mi.', quantityValue),
    'systemReserved',
    (c, v) => ({ ...c, systemReserved: v }),
  ),
  'kube-reserved': bind(
    mapFlag(
      'Resources reserved for Kubernetes daemons, e.g. cpu=200m,memory=500Mi.',
      quantityValue,
    ),
    'kubeReserved',
    (c, v) => ({ ...c, kubeReserved: v }),
  ),
  'enforce-node-allocatable': bind(
    listFlag(
      'Node allocatable enforcements: none, pods, system-reserved(-compressible), kube-reserved(-compressible).',
      (s) => s,
      { repeat: 'replace', defaultText: D.enforceNodeAllocatable.join(',') },
    ),
    'enforceNodeAllocatable',
    (c, v) => ({ ...c, enforceNodeAllocatable: v }),
  ),
  'resolv-conf': bind(
    stringFlag('Resolver configuration pod DNS starts from ("" disables it).', {
      defaultText: D.resolvConf,
    }),
    'resolvConf',
    (c, v) => ({ ...c, resolvConf: v }),
  ),
  'pod-max-pids': bind(
    intFlag('Most processes per pod (-1: no pod limit).', {
      defaultText: String(D.podPidsLimit),
      min: Number.MIN_SAFE_INTEGER,
      max: Number.MAX_SAFE_INTEGER,
    }),
    'podPidsLimit',
    (c, v) => ({ ...c, podPidsLimit: v < 0 ? -1 : v }),
  ),
  'kube-api-qps': bind(
    intFlag('QPS towards the API server.', { defaultText: String(D.kubeAPIQPS) }),
    'kubeAPIQPS',
    (c, v) => ({ ...c, kubeAPIQPS: v }),
  ),
  'kube-api-burst': bind(
    intFlag('Burst towards the API server.', { defaultText: String(D.kubeAPIBurst) }),
    'kubeAPIBurst',
    (c, v) => ({ ...c, kubeAPIBurst: v }),
  ),
  'image-gc-high-threshold': bind(
    intFlag('Disk usage percent above which image GC always runs.', {
      defaultText: String(D.imageGCHighThresholdPercent),
    }),
    'imageGCHighThresholdPercent',
    (c, v) => ({ ...c, imageGCHighThresholdPercent: v }),
  ),
  'image-gc-low-threshold': bind(
    intFlag('Disk usage percent image GC frees down to.', {
      defaultText: String(D.imageGCLowThresholdPercent),
    }),
    'imageGCLowThresholdPercent',
    (c, v) => ({ ...c, imageGCLowThresholdPercent: v }),
  ),
  'container-log-max-size': bind(
    {
      ...stringFlag('Size at which a container log is rotated, e.g. 10Mi.', {
        defaultText: D.containerLogMaxSize,
      }),
      parse: (text: string) => quantityValue(text, 'the log size'),
    },
    'containerLogMaxSize',
    (c, v) => ({ ...c, containerLogMaxSize: v }),
  ),
  'container-log-max-files': bind(
    intFlag('Most log files kept per container.', { defaultText: String(D.containerLogMaxFiles) }),
    'containerLogMaxFiles',
    (c, v) => ({ ...c, containerLogMaxFiles: v }),
  ),
  'seccomp-default': bind(
    boolFlag('Use the RuntimeDefault seccomp profile for workloads without one.', {
      defaultText: String(D.seccompDefault),
    }),
    'seccompDefault',
    (c, v) => ({ ...c, seccompDefault: v }),
  ),
} as const;
