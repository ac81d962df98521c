/**
 * berth's entry point: parse flags and the KubeletConfiguration, build the kubelet,
 * run it until SIGTERM/SIGINT, then shut down in order without touching the pods.
 * Signal handlers are installed here and only here.
 *
 *   node src/cmd/berth.ts --kubeconfig … --config … [flags as the upstream kubelet]
 */
import { mkdir } from 'node:fs/promises';
import { cpus } from 'node:os';
import { CgroupfsManager, detectCgroupVersion } from '../cm/cgroupfs.ts';
import { SystemdCgroupManager } from '../cm/systemd.ts';
import { DbusSystemd } from '../cm/systemd-dbus.ts';
import { isSwapOn, SWAP_ON_MESSAGE } from '../cm/swap.ts';
import { kernelTunableProblems, kernelTunablesMessage } from '../cm/kernel-tunables.ts';
import { configzDocument } from '../config/configz.ts';
import { bootstrapIfConfigured, startCertificateManagers } from './certificates.ts';
import { SelfSignedCertificateError, servingCertificateFiles } from '../certificate/self-signed.ts';
import { loadConfig } from '../config/index.ts';
import { cgroupV1Problem } from '../config/unsupported.ts';
import { ConfigError, HelpRequestedError, VersionRequestedError } from '../config/errors.ts';
import type { KubeletConfig } from '../config/types.ts';
import { GrpcCriClient } from '../cri/index.ts';
import { ApiEventRecorder } from '../events/recorder.ts';
import { LogEventRecorder } from '../events/log-recorder.ts';
import { HttpKubeClient } from '../kube/http-client.ts';
import { NoApiClient } from '../kube/no-api-client.ts';
import { standaloneConfigProblem } from './standalone.ts';
import { Kubelet, type KubeletOptions } from '../kubelet/kubelet.ts';
import { evictionOptionsOf } from '../kubelet/eviction-wiring.ts';
import { EvictionConfigError } from '../eviction/thresholds.ts';
import { logRotatePolicy } from '../logs/index.ts';
import { KubeletMetrics } from '../metrics/registry.ts';
import { KUBELET_VERSION, nodeReserved } from '../nodestatus/build.ts';
import { shutdownPeriods } from '../nodeshutdown/config.ts';
import { LinuxHostInfo } from '../nodestatus/host-info.ts';
import { DevKmsgSource } from '../oom/kmsg.ts';
import { detectNodeIP } from '../nodestatus/node-ip.ts';
import { systemClock } from '../util/clock.ts';
import { createLogger, LogVerbosity } from '../util/logger.ts';
import { setOpenFilesLimit } from '../util/rlimit.ts';
import { applyOomScoreAdj } from '../util/oom-score.ts';
import { parseQuantity } from '../util/quantity.ts';

function socketPath(endpoint: string): string {
  if (endpoint.startsWith('unix://')) return endpoint.slice('unix://'.length);
  if (endpoint.startsWith('/')) return endpoint;
  throw new ConfigError(
    `Cannot use container runtime endpoint "${endpoint}": only unix:// sockets are supported`,
  );
}

/** evictionHard memory.available as bytes, nodefs.available as a fraction (for allocatable). */
function evictionReserve(hard: Readonly<Record<string, string>>): {
  memoryBytes: number;
  nodefsFraction: number;
} {
  const mem = hard['memory.available'] ?? '100Mi';
  const nodefs = hard['nodefs.available'] ?? '10%';
  return {
    memoryBytes: mem.endsWith('%') ? 0 : parseQuantity(mem),
    nodefsFraction: nodefs.endsWith('%') ? Number(nodefs.slice(0, -1)) / 100 : 0,
  };
}

/**
 * The kubelet API server's settings from the KubeletConfiguration; `tls` is the serving
 * pair servingCertificateFiles chose (the configured one, or the self-signed one).
 */
function serverOptions(
  k: KubeletConfig,
  tls: { readonly tlsCertFile: string | null; readonly tlsPrivateKeyFile: string | null },
  verbosity: LogVerbosity,
): NonNullable<KubeletOptions['server']> {
  if ((tls.tlsCertFile === null || tls.tlsPrivateKeyFile === null) && !k.serverTLSBootstrap) {
    throw new ConfigError(
      'Cannot serve the kubelet API as tlsCertFile and tlsPrivateKeyFile must be set together',
    );
  }
  return {
    address: k.address,
    port: k.port,
    healthzAddress: k.healthzBindAddress,
    healthzPort: k.healthzPort,
    readOnlyPort: k.readOnlyPort,
    streamingConnectionIdleTimeoutMs: k.streamingConnectionIdleTimeoutMs,
    tlsCertFile: tls.tlsCertFile,
    tlsPrivateKeyFile: tls.tlsPrivateKeyFile,
    ...(k.tlsMinVersion === 'VersionTLS13' && { tlsMinVersion: 'TLSv1.3' as const }),
    clientCAFile: k.authentication.x509.clientCAFile,
    webhookAuthentication: k.authentication.webhook.enabled,
    authenticationCacheTTLMs: k.authentication.webhook.cacheTTLMs,
    anonymous: k.authentication.anonymous.enabled,
    authorizationMode: k.authorization.mode,
    authorizedTTLMs: k.authorization.webhook.cacheAuthorizedTTLMs,
    unauthorizedTTLMs: k.authorization.webhook.cacheUnauthorizedTTLMs,
    debuggingHandlers: k.enableDebuggingHandlers,
    configz: configzDocument(k),
    systemLogHandler: k.enableSystemLogHandler,
    // enableSystemLogQuery (default false) is the switch; featureGates NodeLogQuery=false also turns it off.
    systemLogQuery: k.enableSystemLogQuery && k.featureGates['NodeLogQuery'] !== false,
    ...(k.enableDebugFlagsHandler && { debugFlags: verbosity }),
  };
}

async function main(argv: readonly string[]): Promise<number> {
  let config;
  try {
    config = await loadConfig(argv);
  } catch (err) {
    if (err instanceof VersionRequestedError) {
      // Upstream's wording ("Kubernetes v1.37.2"); kubeadm's preflight parses it.
      const [major = '', minor = ''] = KUBELET_VERSION.slice(1).split('.');
      process.stdout.write(
        err.raw
          ? `version.Info{Major:"${major}", Minor:"${minor}", GitVersion:"${KUBELET_VERSION}", Platform:"${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}"}\n`
          : `Kubernetes ${KUBELET_VERSION}\n`,
      );
      return 0;
    }
    if (err instanceof HelpRequestedError) {
      process.stdout.write(`${err.usage}\n`);
      return 0;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`berth: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const k = config.kubelet;
  // One verbosity for every logger, so PUT /debug/flags/v changes it for all of them.
  const verbosity = new LogVerbosity(config.verbosity);
  const logger = createLogger({ verbosity, format: config.loggingFormat });
  try {
    await setOpenFilesLimit(k.maxOpenFiles, AbortSignal.timeout(10_000));
  } catch (err) {
    // Upstream logs this and starts anyway.
    logger.error('Failed to set rlimit on max file handles', { error: String(err) });
  }
  try {
    await applyOomScoreAdj(k.oomScoreAdj);
  } catch (err) {
    // Lowering the score needs CAP_SYS_RESOURCE; upstream logs this and starts anyway.
    logger.info('Failed to ApplyOOMScoreAdj', { error: String(err) });
  }
  let server: KubeletOptions['server'];
  let eviction: KubeletOptions['eviction'];
  try {
    // Upstream's InitializeTLS: with no pair configured, a self-signed one in --cert-dir.
    const tls = await servingCertificateFiles({
      tlsCertFile: k.tlsCertFile,
      tlsPrivateKeyFile: k.tlsPrivateKeyFile,
      serverTLSBootstrap: k.serverTLSBootstrap,
      certDir: config.certDir,
      host: config.nodeName,
      clock: systemClock,
      logger,
    });
    server = k.enableServer ? serverOptions(k, tls, verbosity) : undefined;
    eviction = evictionOptionsOf(k);
  } catch (err) {
    if (!(
      err instanceof ConfigError ||
      err instanceof EvictionConfigError ||
      err instanceof SelfSignedCertificateError
    ))
      throw err;
    process.stderr.write(`berth: ${err.message}\n`);
    return 2;
  }
  logger.info('Starting berth', { node: config.nodeName, version: '0.1.0' });
  // Upstream's standalone mode: no --kubeconfig, no API client at all.
  const kubeconfig = config.kubeconfig ?? '';
  const standalone = kubeconfig === '';
  const standaloneProblem = standalone ? standaloneConfigProblem(k) : undefined;
  if (standaloneProblem !== undefined) {
    process.stderr.write(`berth: ${standaloneProblem}\n`);
    return 2;
  }
  if (standalone) logger.info('Standalone mode, no API client');
  if (k.failSwapOn && (await isSwapOn())) {
    process.stderr.write(`berth: ${SWAP_ON_MESSAGE}\n`);
    return 1;
  }
  const cgroupProblem = cgroupV1Problem(k, await detectCgroupVersion());
  if (cgroupProblem !== undefined) {
    process.stderr.write(`berth: ${cgroupProblem}\n`);
    return 1;
  }
  const kernelProblems = k.protectKernelDefaults ? await kernelTunableProblems() : [];
  if (kernelProblems.length > 0) {
    process.stderr.write(`berth: ${kernelTunablesMessage(kernelProblems)}\n`);
    return 1;
  }
  await mkdir(config.rootDir, { recursive: true });
  // Signal handlers are installed once; what they stop depends on how far start-up got.
  const certs = new AbortController();
  let stopping: Promise<void> | undefined;
  // Filled in once everything that must be stopped exists.
  const shutdown: { teardown?: () => Promise<void> } = {};
  const stop = (sig: string): void => {
    if (stopping !== undefined) return;
    logger.info('Shutting down (pods keep running)', { signal: sig });
    certs.abort();
    stopping = shutdown.teardown?.() ?? Promise.resolve();
  };
  process.once('SIGTERM', () => {
    stop('SIGTERM');
  });
  process.once('SIGINT', () => {
    stop('SIGINT');
  });
  // Without --node-ip, upstream's choice (hostname override, DNS, the default route's
  // interface); loopback only when the host has none of those.
  const detected =
    config.nodeIPs.length > 0
      ? undefined
      : await detectNodeIP(config.nodeName, config.hostnameOverride);
  if (config.nodeIPs.length === 0)
    logger.info('Node IP chosen (no --node-ip)', { nodeIP: detected ?? '127.0.0.1' });
  const nodeIPs = config.nodeIPs.length > 0 ? config.nodeIPs : [detected ?? '127.0.0.1'];
  const certOptions = {
    config: { ...config, kubeconfig },
    k,
    nodeIPs,
    clock: systemClock,
    logger: logger.child({ component: 'certificates' }),
  };
  try {
    if (!standalone) await bootstrapIfConfigured(certOptions, certs.signal);
  } catch (err) {
    if (certs.signal.aborted) return 0;
    throw err;
  }
  // From the kubeconfig path, so a rotated client certificate can be reloaded.
  const kube = standalone
    ? new NoApiClient()
    : await HttpKubeClient.fromKubeconfig(kubeconfig, {
        qps: k.kubeAPIQPS,
        burst: k.kubeAPIBurst,
        clock: systemClock,
        logger: logger.child({ component: 'kube-client' }),
      });
  const certificates =
    kube instanceof HttpKubeClient
      ? await startCertificateManagers(certOptions, kube, certs.signal)
      : { serving: undefined, stopped: () => Promise.resolve() };
  const metrics = new KubeletMetrics({ nodeName: config.nodeName });
  const cri = new GrpcCriClient(socketPath(k.containerRuntimeEndpoint), {
    defaultTimeoutMs: k.runtimeRequestTimeoutMs,
    metrics: metrics.cri,
  });
  const recorder = standalone
    ? new LogEventRecorder(logger.child({ component: 'events' }))
    : new ApiEventRecorder({
        client: kube,
        clock: systemClock,
        logger: logger.child({ component: 'events' }),
        nodeName: config.nodeName,
        qps: k.eventRecordQPS,
        burst: k.eventBurst,
      });
  const reserve = evictionReserve(k.evictionHard);
  const cgroupVersion = await detectCgroupVersion();
  const systemdBus = new DbusSystemd({
    clock: systemClock,
    logger: logger.child({ component: 'systemd-cgroups' }),
  });
  const kubelet = new Kubelet(
    {
      nodeName: config.nodeName,
      nodeIPs,
      nodeLabels: config.nodeLabels,
      registerWithTaints: k.registerWithTaints,
      ...(k.providerID !== null && { providerID: k.providerID }),
      podLogsDir: k.podLogsDir,
      cgroupRoot: k.cgroupRoot ?? '',
      cgroupsPerQOS: k.cgroupsPerQOS,
      // Upstream: podsPerCore, when set, caps maxPods at podsPerCore × the node's cores.
      maxPods: k.podsPerCore > 0 ? Math.min(k.maxPods, k.podsPerCore * cpus().length) : k.maxPods,
      kubeletPort: k.port,
      syncFrequencyMs: k.syncFrequencyMs,
      volumeStatsAggPeriodMs: k.volumeStatsAggPeriodMs,
      nodeStatusUpdateFrequencyMs: k.nodeStatusUpdateFrequencyMs,
      nodeStatusReportFrequencyMs: k.nodeStatusReportFrequencyMs,
      nodeStatusMaxImages: k.nodeStatusMaxImages,
      nodeLeaseDurationSeconds: k.nodeLeaseDurationSeconds,
      maxParallelImagePulls: k.serializeImagePulls ? 1 : (k.maxParallelImagePulls ?? 10),
      registryPull: { qps: k.registryPullQPS, burst: k.registryBurst },
      memoryThrottlingFactor: k.memoryThrottlingFactor,
      singleProcessOOMKill: k.singleProcessOOMKill,
      evictionMemoryBytes: reserve.memoryBytes,
      evictionNodefsFraction: reserve.nodefsFraction,
      reserved: nodeReserved(k.kubeReserved, k.systemReserved),
      clusterDNS: k.clusterDNS,
      clusterDomain: k.clusterDomain ?? '',
      resolvConf: k.resolvConf,
      rootDir: config.rootDir,
      containerLogSymlinkDir: config.containerLogSymlinkDir,
      cgroupDriver: k.cgroupDriver,
      podPidsLimit: k.podPidsLimit,
      seccompDefault: k.seccompDefault,
      allowedUnsafeSysctls: k.allowedUnsafeSysctls,
      logRotation: logRotatePolicy(k),
      ...(server !== undefined && { server }),
      standalone,
      eviction,
      featureGates: k.featureGates,
      userNamespacesIdsPerPod: k.userNamespaces.idsPerPod,
      nodeShutdown: {
        periods: shutdownPeriods(k),
        // Where the InhibitDelayMaxSec drop-in goes instead of /etc/systemd/logind.conf.d:
        // tests run logind privately and must never write the host's configuration.
        ...(process.env['BERTH_LOGIND_CONF_DIR'] !== undefined && {
          logindConfigDirectory: process.env['BERTH_LOGIND_CONF_DIR'],
        }),
      },
      staticPods: {
        ...(k.staticPodPath !== null && { staticPodPath: k.staticPodPath }),
        ...(k.staticPodURL !== null && { staticPodURL: k.staticPodURL }),
        staticPodURLHeader: k.staticPodURLHeader,
        fileCheckFrequencyMs: k.fileCheckFrequencyMs,
        httpCheckFrequencyMs: k.httpCheckFrequencyMs,
      },
    },
    {
      kube,
      cri,
      recorder,
      clock: systemClock,
      logger,
      host: new LinuxHostInfo(config.rootDir),
      kmsg: new DevKmsgSource(),
      metrics,
      cgroups: new CgroupfsManager({ version: cgroupVersion }),
      // Connects to the system bus only when the runtime's driver is systemd.
      systemdCgroups: new SystemdCgroupManager({ version: cgroupVersion, bus: systemdBus }),
      ...(certificates.serving !== undefined && { servingCertificate: certificates.serving }),
    },
  );
  shutdown.teardown = async () => {
    await kubelet.stop();
    systemdBus.close();
    certs.abort();
    await certificates.stopped();
    await recorder.close();
    await kube.close();
    cri.close();
  };
  if (certs.signal.aborted) stopping = shutdown.teardown();
  try {
    await kubelet.start();
  } catch (err) {
    if (stopping === undefined) throw err;
  }
  logger.info('berth is running', { node: config.nodeName });
  // Keep the process alive until a signal starts the shutdown.
  await new Promise<void>((resolve) => {
    const wait = setInterval(() => {
      if (stopping !== undefined) {
        clearInterval(wait);
        resolve();
      }
    }, 200);
  });
  await stopping;
  logger.info('berth stopped');
  return 0;
}

process.exitCode = await main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(
    `berth: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  return 1;
});
