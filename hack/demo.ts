/**
 * `make demo` / `make demo-stop`: a local single-node cluster left running, its state
 * under .demo/, the admin kubeconfig at .demo/kubeconfig.
 *
 *   node hack/demo.ts up | down | status
 */
import { copyFile, mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startBerth } from '../test/harness/berth-node.ts';
import { REPO_ROOT } from '../test/harness/binaries.ts';
import { eventually } from '../test/harness/kube-helpers.ts';
import { readClusterState, startCluster, STATE_FILE } from '../test/harness/cluster.ts';
import { isAlive } from '../test/harness/process.ts';
import { findLeaks, teardownCluster, type ClusterState } from '../test/harness/teardown.ts';

const DEMO = join(REPO_ROOT, '.demo');
const ROOT = join(DEMO, 'cluster');
const KUBECONFIG = join(DEMO, 'kubeconfig');
/** The node's staticPodPath: a manifest dropped here runs as a static pod. */
const MANIFESTS = join(DEMO, 'manifests');
// A fixed port so the kubeconfig stays valid across `make demo` runs.
const APISERVER_PORT = 16443;

const say = (m: string): void => {
  console.log(`[demo] ${m}`);
};

async function existing(): Promise<ClusterState | undefined> {
  const exists = await stat(join(ROOT, STATE_FILE)).then(
    () => true,
    () => false,
  );
  return exists ? readClusterState(ROOT) : undefined;
}

async function down(): Promise<void> {
  const state = await existing();
  if (state === undefined) {
    say('no demo cluster is running');
    return;
  }
  say(`stopping demo cluster ${state.id}`);
  await teardownCluster(state, say);
  const leaks = await findLeaks(state);
  if (leaks.length > 0) throw new Error(`Demo teardown left:\n${leaks.join('\n')}`);
  await rm(KUBECONFIG, { force: true });
  say('stopped; nothing left behind');
}

async function up(): Promise<void> {
  const state = await existing();
  if (state !== undefined) {
    if (state.processes.length > 0 && state.processes.every((p) => isAlive(p.pid))) {
      say(`demo cluster ${state.id} is already running; kubeconfig: ${KUBECONFIG}`);
      return;
    }
    say('found a stopped or broken demo cluster; cleaning it up first');
    await down();
  }
  await mkdir(DEMO, { recursive: true });
  const cluster = await startCluster({
    root: ROOT,
    detached: true,
    apiserverPort: APISERVER_PORT,
    log: say,
  });
  say('starting berth as the node');
  await mkdir(MANIFESTS, { recursive: true });
  const berth = await startBerth(cluster, {
    nodeName: 'berth-demo',
    detached: true,
    extraConfig: [`staticPodPath: ${MANIFESTS}`],
  });
  // Recorded last, so teardown (reverse order) stops berth first.
  const recorded = await readClusterState(ROOT);
  const processes = [
    ...recorded.processes,
    { name: berth.process.name, pid: berth.process.pid, logFile: berth.logFile },
  ];
  await writeFile(join(ROOT, STATE_FILE), JSON.stringify({ ...recorded, processes }, null, 2));
  const kubectl = cluster.bin.kubectl;
  try {
    await eventually(
      'the berth node to be Ready',
      async () => {
        const out = await cluster.kubectl([
          'get',
          'node',
          'berth-demo',
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
        ]);
        return out.trim() === 'True' ? true : undefined;
      },
      60_000,
    );
  } catch (err) {
    say(`berth did not become Ready; its log is ${berth.logFile}`);
    throw err;
  }
  await copyFile(cluster.adminKubeconfig, KUBECONFIG);
  const k = `${kubectl} --kubeconfig ${KUBECONFIG}`;
  say('');
  say(
    `cluster ${cluster.id} is up: etcd, kube-apiserver (${cluster.controlPlane.server}), kube-controller-manager,`,
  );
  say(
    `kube-scheduler, ${cluster.runtime.kind} (socket ${cluster.runtime.socket}) and a registry at ${cluster.registry.host}.`,
  );
  say(`The node is berth: berth-demo (log: ${berth.logFile}).`);
  say(
    'Images offered (preloaded in the runtime / in the registry, which needs the credentials below):',
  );
  say(`  ${cluster.images.busyboxLocal}   ${cluster.images.busybox}`);
  say(`  ${cluster.images.pauseLocal}   ${cluster.images.pause}`);
  say(`Registry credentials: ${join(ROOT, 'registry', 'credentials.json')}`);
  say('Try:');
  say(`  ${k} get nodes -o wide`);
  say(
    `  ${k} run hello --image=${cluster.images.busyboxLocal} --image-pull-policy=IfNotPresent --overrides='{"spec":{"automountServiceAccountToken":false}}' -- sleep 3600`,
  );
  say(`  ${k} get pods -o wide`);
  say(`Static pods: a Pod manifest dropped into ${MANIFESTS} runs at once as <name>-berth-demo,`);
  say(`mirrored in the API (${k} get pods -A); removing the file stops it.`);
  say('Stop it with: make demo-stop');
}

const command = process.argv[2] ?? 'up';
switch (command) {
  case 'up':
    await up();
    // The cluster runs detached; do not wait for stray handles of the set-up to close.
    process.exit(0);
    break;
  case 'down':
    await down();
    break;
  default:
    console.error(`usage: node hack/demo.ts up|down (got "${command}")`);
    process.exitCode = 2;
}
