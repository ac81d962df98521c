/**
 * The plugin manager's handler for CSIPlugin sockets (upstream's csi RegistrationHandler
 * in pkg/volume/csi/csi_plugin.go): validate the versions, name and endpoint; register
 * the driver in the registry, ask it NodeGetInfo, and record it on the CSINode and the
 * Node; on deregistration remove it from all three. A failure after the driver was put
 * in the registry takes it out again, as upstream's unregisterDriver does.
 */
import type { Logger } from '../util/logger.ts';
import type { CsiNodeInfoManager } from './node-info.ts';
import { CSI_PLUGIN_NAME, type CsiDriverStore } from './registry.ts';

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Structurally a pluginmanager PluginHandler (the plugin manager does not know CSI). */
export class CsiRegistrationHandler {
  readonly #store: CsiDriverStore;
  readonly #nodeInfo: CsiNodeInfoManager;
  readonly #logger: Logger;

  constructor(store: CsiDriverStore, nodeInfo: CsiNodeInfoManager, logger: Logger) {
    this.#store = store;
    this.#nodeInfo = nodeInfo;
    this.#logger = logger;
  }

  validate(name: string, endpoint: string, versions: readonly string[]): Promise<void> {
    this.#logger.info(
      `${CSI_PLUGIN_NAME}: Trying to validate a new CSI Driver with name: ${name} endpoint: ${endpoint} versions: ${versions.join(',')}`,
    );
    try {
      this.#store.validate(name, endpoint, versions);
    } catch (err) {
      return Promise.reject(
        new Error(
          `validation failed for CSI Driver ${name} at endpoint ${endpoint}: ${messageOf(err)}`,
          { cause: err },
        ),
      );
    }
    return Promise.resolve();
  }

  async register(
    name: string,
    endpoint: string,
    versions: readonly string[],
    signal: AbortSignal,
  ): Promise<void> {
    this.#logger.info(
      `${CSI_PLUGIN_NAME}: Register new plugin with name: ${name} at endpoint: ${endpoint}`,
    );
    const client = this.#store.register(name, endpoint, versions);
    try {
      const info = await client.nodeGetInfo(signal);
      await this.#nodeInfo.installDriver(
        name,
        info.nodeId,
        info.maxVolumesPerNode,
        info.accessibleTopology,
        signal,
      );
      this.#logger.info('CSI driver registered', {
        driver: name,
        endpoint,
        nodeID: info.nodeId,
        maxVolumesPerNode: info.maxVolumesPerNode,
        topology: info.accessibleTopology,
      });
    } catch (err) {
      await this.#unregister(name, endpoint, signal);
      throw err;
    }
  }

  async deregister(name: string, endpoint: string, signal: AbortSignal): Promise<void> {
    this.#logger.info(
      `${CSI_PLUGIN_NAME}: registrationHandler.DeRegisterPlugin request for plugin ${name}, endpoint ${endpoint}`,
    );
    await this.#unregister(name, endpoint, signal);
  }

  /** Upstream's unregisterDriver: out of the registry, then off the CSINode and the Node. */
  async #unregister(name: string, endpoint: string, signal: AbortSignal): Promise<void> {
    // A driver replaced by a registration at another endpoint stays.
    if (!this.#store.deregister(name, endpoint)) return;
    try {
      await this.#nodeInfo.uninstallDriver(name, signal);
    } catch (err) {
      this.#logger.error(`${CSI_PLUGIN_NAME}: Error uninstalling CSI driver: ${messageOf(err)}`, {
        driver: name,
      });
    }
  }
}
