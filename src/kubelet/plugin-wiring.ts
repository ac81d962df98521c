/**
 * The plugin manager and the CSI node info in the kubelet: once the Node is registered
 * (the CSINode is owned by it, so its uid must exist), the CSINode is initialized (empty,
 * upstream does it at start so the scheduler and the attach-detach controller see the
 * node) and the plugin manager watches `<rootDir>/plugins_registry/`, registering CSI
 * drivers into the kubelet's CsiDriverStore, which the volume manager reads. The loop
 * ends when the kubelet stops; the manager then stops and waits for its operations.
 */
import { join } from 'node:path';
import { KubeCsiNodeInfoManager, type CsiNodeInfoManager } from '../csi/node-info.ts';
import { CsiRegistrationHandler } from '../csi/registration-handler.ts';
import type { CsiDriverStore } from '../csi/registry.ts';
import type { KubeClient } from '../kube/types.ts';
import { PluginManagerImpl } from '../pluginmanager/manager.ts';
import { GrpcRegistrationClient } from '../pluginmanager/registration-client.ts';
import { FsSocketSource, PLUGINS_REGISTRY_DIR } from '../pluginmanager/socket-source.ts';
import { CSI_PLUGIN, type PluginHandler, type PluginManager } from '../pluginmanager/types.ts';
import { retryDelay } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';

/** The kubelet's parts the loop uses. */
export interface PluginWiringParts {
  /** The registry the volume manager reads (Kubelet.csiDrivers). */
  readonly csiDrivers: CsiDriverStore;
  readonly nodeStatus: { whenRegistered(signal: AbortSignal): Promise<void> };
}

export interface PluginWiringOptions {
  readonly nodeName: string;
  readonly rootDir: string;
}

export interface PluginWiringDeps {
  readonly kube: KubeClient;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Tests replace the manager (default: the real one on `<rootDir>/plugins_registry`). */
  readonly newPluginManager?: (handlers: ReadonlyMap<string, PluginHandler>) => PluginManager;
  readonly nodeInfo?: CsiNodeInfoManager;
}

/** Retries the CSINode's initialization until it succeeds or `signal` aborts. */
async function initializeCsiNode(
  nim: CsiNodeInfoManager,
  clock: Clock,
  logger: Logger,
  signal: AbortSignal,
): Promise<void> {
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      await nim.initialize(signal);
      return;
    } catch (err) {
      if (isAborted(signal)) return;
      const delay = retryDelay(attempt, 1_000, 30_000);
      logger.warn('Failed to initialize CSINode, will retry', {
        err: String(err),
        retryInMs: Math.round(delay),
      });
      await clock.sleep(delay, signal).catch(() => undefined);
    }
  }
}

/** The kubelet loop that runs the plugin manager (API mode only: CSI needs the Node). */
export function pluginManagerLoop(
  parts: PluginWiringParts,
  options: PluginWiringOptions,
  d: PluginWiringDeps,
): (signal: AbortSignal) => Promise<void> {
  return async (signal) => {
    await parts.nodeStatus.whenRegistered(signal);
    const logger = d.logger.child({ component: 'pluginmanager' });
    const nim =
      d.nodeInfo ??
      new KubeCsiNodeInfoManager({
        client: d.kube,
        nodeName: options.nodeName,
        clock: d.clock,
        logger: logger.child({ plugin: 'kubernetes.io/csi' }),
      });
    const csi = new CsiRegistrationHandler(
      parts.csiDrivers,
      nim,
      logger.child({ plugin: 'kubernetes.io/csi' }),
    );
    const handlers = new Map<string, PluginHandler>([[CSI_PLUGIN, csi]]);
    const manager =
      d.newPluginManager?.(handlers) ??
      new PluginManagerImpl({
        source: new FsSocketSource(join(options.rootDir, PLUGINS_REGISTRY_DIR), logger),
        handlers,
        newClient: (socketPath) => new GrpcRegistrationClient(socketPath),
        clock: d.clock,
        logger,
      });
    const init = initializeCsiNode(nim, d.clock, logger, signal);
    try {
      await manager.start(signal);
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else
          signal.addEventListener(
            'abort',
            () => {
              resolve();
            },
            { once: true },
          );
      });
    } finally {
      await manager.stop();
      await init;
    }
  };
}
