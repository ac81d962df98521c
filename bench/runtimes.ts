/**
 * A second containerd for the paired benchmark: the same flavour and configuration as
 * the cluster's own, with its own directory (under the cluster root, so teardown finds
 * its shims and mounts), its own bridge and pod subnet, and the test images preloaded.
 * Two kubelets cannot share one runtime: each removes the sandboxes it does not know.
 */
import { join } from 'node:path';
import { buildImages } from '../hack/images/build.ts';
import { GrpcCriClient } from '../src/cri/index.ts';
import { pickSubnetPrefix, type Cluster } from '../test/harness/cluster.ts';
import { importImage, startContainerd, type Containerd } from '../test/harness/containerd.ts';
import { run } from '../test/harness/exec.ts';
import { unmountAll } from '../test/harness/upstream-kubelet.ts';

export interface ExtraRuntime {
  readonly runtime: Containerd;
  /** Removes its sandboxes, stops it, unmounts what it mounted and deletes its bridge. */
  stop(): Promise<void>;
}

/** Stops and removes every sandbox of the runtime at `socket`; returns how many there were. */
export async function clearSandboxes(socket: string): Promise<number> {
  const client = new GrpcCriClient(socket, { defaultTimeoutMs: 60_000 });
  try {
    const { items } = await client.runtime.listPodSandbox({});
    for (const s of items) {
      await client.runtime.stopPodSandbox({ podSandboxId: s.id });
      await client.runtime.removePodSandbox({ podSandboxId: s.id });
    }
    return items.length;
  } finally {
    client.close();
  }
}

/** Runtimes started and not yet stopped, so an interrupted run can stop them. */
const started = new Set<ExtraRuntime>();

/** Starts containerd `name` (a short word: it goes into the bridge's name) for `cluster`. */
export async function startExtraRuntime(cluster: Cluster, name: string): Promise<ExtraRuntime> {
  const bridge = `bt${name}${cluster.id}`;
  if (bridge.length > 15) throw new Error(`Cannot name a bridge ${bridge}: over 15 characters`);
  const dir = join(cluster.root, `containerd-${name}`);
  const [images, subnetPrefix] = await Promise.all([buildImages(), pickSubnetPrefix()]);
  const runtime = await startContainerd({
    kind: cluster.runtime.kind,
    dir,
    bin: cluster.bin,
    detached: false,
    sandboxImage: images.pause.localRef,
    registryHost: cluster.registry.host,
    registryCa: cluster.pki.ca.cert,
    bridge,
    subnetPrefix,
  });
  let stopped: Promise<void> | undefined;
  const extra: ExtraRuntime = {
    runtime,
    stop() {
      stopped ??= (async () => {
        started.delete(extra);
        await clearSandboxes(runtime.socket);
        await runtime.process.stop(10_000);
        await unmountAll(dir);
        await run('ip', ['link', 'del', bridge]).catch(() => undefined);
      })();
      return stopped;
    },
  };
  started.add(extra);
  try {
    await Promise.all(
      [images.pause, images.busybox, images.grpcHealth].map((i) => importImage(runtime, i.archive)),
    );
  } catch (err) {
    await extra.stop();
    throw err;
  }
  return extra;
}

/** Stops every extra runtime still running (an interrupted run), before the cluster goes. */
export async function stopExtraRuntimes(log: (message: string) => void): Promise<void> {
  for (const r of [...started]) {
    await r.stop().catch((err: unknown) => {
      log(`stopping the runtime at ${r.runtime.socket}: ${String(err)}`);
    });
  }
}
