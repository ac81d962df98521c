/**
 * The registered CSI drivers (upstream's csiDrivers map in pkg/volume/csi): name ->
 * endpoint, highest supported version and a node client. The plugin manager's CSI
 * handler writes it; the volume manager reads it through CsiDriverRegistry.
 *
 * Versions as upstream's validateVersions: a driver must list a 1.x version; a second
 * registration of a name already registered at another endpoint must offer a higher
 * version. The same endpoint registering again (a restarted driver recreating its
 * socket) replaces the entry.
 */
import { isAbsolute } from 'node:path';
import { GrpcCsiNodeClient, type ClosableCsiNodeClient } from './grpc-client.ts';
import type { CsiDriverRegistry, CsiNodeClient } from './types.ts';
import { socketPathOf } from './unary.ts';
import {
  compareVersions,
  formatVersion,
  highestSupportedVersion,
  type GenericVersion,
} from './versions.ts';

/** Upstream's log prefix for the CSI plugin's messages. */
export const CSI_PLUGIN_NAME = 'kubernetes.io/csi';

/** The registry as the CSI registration handler uses it. */
export interface CsiDriverStore extends CsiDriverRegistry {
  /** Throws (upstream's wording) when the driver cannot be registered. */
  validate(name: string, endpoint: string, versions: readonly string[]): void;
  /** Validates, then adds or replaces the driver; returns its node client. */
  register(name: string, endpoint: string, versions: readonly string[]): CsiNodeClient;
  /** Removes the driver if it is still registered at `endpoint`; true when it was. */
  deregister(name: string, endpoint: string): boolean;
}

interface Entry {
  readonly endpoint: string;
  readonly version: GenericVersion;
  readonly client: ClosableCsiNodeClient;
}

export type CsiClientFactory = (driverName: string, endpoint: string) => ClosableCsiNodeClient;

export class CsiDriverRegistryImpl implements CsiDriverStore {
  readonly #drivers = new Map<string, Entry>();
  readonly #newClient: CsiClientFactory;

  constructor(
    newClient: CsiClientFactory = (name, endpoint) => new GrpcCsiNodeClient(name, endpoint),
  ) {
    this.#newClient = newClient;
  }

  client(driverName: string): CsiNodeClient | undefined {
    return this.#drivers.get(driverName)?.client;
  }

  drivers(): readonly string[] {
    return [...this.#drivers.keys()].sort();
  }

  /** The endpoint a driver is registered at (for logs and tests). */
  endpoint(driverName: string): string | undefined {
    return this.#drivers.get(driverName)?.endpoint;
  }

  validate(name: string, endpoint: string, versions: readonly string[]): void {
    this.#check('ValidatePlugin', name, endpoint, versions);
  }

  register(name: string, endpoint: string, versions: readonly string[]): CsiNodeClient {
    const version = this.#check('RegisterPlugin', name, endpoint, versions);
    const previous = this.#drivers.get(name);
    const client = this.#newClient(name, endpoint);
    this.#drivers.set(name, { endpoint, version, client });
    previous?.client.close();
    return client;
  }

  deregister(name: string, endpoint: string): boolean {
    const entry = this.#drivers.get(name);
    if (entry?.endpoint !== endpoint) return false;
    this.#drivers.delete(name);
    entry.client.close();
    return true;
  }

  /** Closes every client (berth's shutdown). */
  close(): void {
    for (const entry of this.#drivers.values()) entry.client.close();
    this.#drivers.clear();
  }

  #check(
    caller: string,
    name: string,
    endpoint: string,
    versions: readonly string[],
  ): GenericVersion {
    const fail = (why: string): Error =>
      new Error(`${CSI_PLUGIN_NAME}: ${caller} for CSI driver "${name}" failed. ${why}`);
    if (name === '') throw fail('The driver name is empty');
    if (!isAbsolute(socketPathOf(endpoint))) {
      throw fail(`The endpoint "${endpoint}" is not an absolute path`);
    }
    if (versions.length === 0) {
      throw fail('Plugin returned an empty list for supported versions');
    }
    let highest: GenericVersion;
    try {
      highest = highestSupportedVersion(versions);
    } catch (err) {
      const quoted = versions.map((v) => JSON.stringify(v)).join(' ');
      throw fail(
        `None of the versions specified [${quoted}] are supported. err=${(err as Error).message}`,
      );
    }
    const existing = this.#drivers.get(name);
    if (
      existing !== undefined &&
      existing.endpoint !== endpoint &&
      compareVersions(existing.version, highest) >= 0
    ) {
      throw fail(
        `Another driver with the same name is already registered with a higher supported version: "${formatVersion(existing.version)}"`,
      );
    }
    return highest;
  }
}
