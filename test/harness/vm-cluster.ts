/**
 * A test cluster whose nodes are virtual machines: the host's control plane (the usual
 * test cluster, its apiserver served on the host-only bridge's address) and `guests`
 * guests on that bridge (test/harness/vm.ts), ready for startGuestNode (vm-node.ts).
 * `stop()` removes guests, taps, bridge, overlays and the cluster; `leaks()` reports
 * whatever survived.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './binaries.ts';
import { startCluster, type Cluster } from './cluster.ts';
import { run } from './exec.ts';
import {
  findVmLeaks,
  guestImage,
  startGuests,
  teardownVms,
  type Guest,
  type VmState,
} from './vm.ts';
import { createVmNetwork, deleteLinks, type VmNetwork } from './vm-net.ts';

export interface VmCluster {
  readonly cluster: Cluster;
  readonly network: VmNetwork;
  readonly guests: readonly Guest[];
  readonly image: string;
  stop(): Promise<void>;
  leaks(): Promise<string[]>;
}

export async function startVmCluster(options: {
  guests: number;
  log?: (message: string) => void;
}): Promise<VmCluster> {
  const log = options.log ?? (() => undefined);
  const image = await guestImage(log);
  // Guests run bin/berth from the repository's share: with .build/ older than src/ it would
  // load the .ts sources through Node's type stripper, minutes under emulation.
  log('vm: berth as JavaScript (hack/build-js.ts)');
  await run(join(REPO_ROOT, 'node_modules/.bin/node'), [
    '--no-warnings=ExperimentalWarning',
    join(REPO_ROOT, 'hack/build-js.ts'),
  ]);
  const id = randomBytes(3).toString('hex');
  const root = await mkdtemp(join(tmpdir(), `berth-vm-${id}-`));
  const network = await createVmNetwork(id);
  let cluster: Cluster | undefined;
  let state: (() => VmState) | undefined;
  const stop = async (): Promise<void> => {
    if (state !== undefined) await teardownVms(state());
    else await deleteLinks([network.bridge]);
    await cluster?.stop();
  };
  try {
    cluster = await startCluster({ apiserverAddress: network.hostIp, log });
    const started = await startGuests({
      image,
      network,
      root,
      count: options.guests,
      namePrefix: `vm${id}`,
      log,
      onState: (st) => {
        state = st;
      },
    });
    let stopped: Promise<void> | undefined;
    const c = cluster;
    const s = started.state;
    return {
      cluster: c,
      network,
      guests: started.guests,
      image,
      stop: () => (stopped ??= stop()),
      leaks: async () => [...(await findVmLeaks(s())), ...(await c.leaks())],
    };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
