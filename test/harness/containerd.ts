/**
 * A private containerd for one test cluster: its own root, state, socket, runc root,
 * CNI config and host-local IPAM directory, all under the cluster's directory. Two
 * flavours: containerd 2.x built from its Go module (config v3) and Debian's 1.6
 * (config v2). On this machine the CRI plugin needs restrict_oom_score_adj, since
 * root lacks CAP_SYS_RESOURCE.
 *
 * Networking: the bridge is created here with the gateway address and the CNI bridge
 * plugin only attaches pods to it (isGateway false), so the plugin never turns on IP
 * forwarding, and pods get no default route, only one to the service CIDR via the
 * gateway (where kube-proxy's DNAT turns it into a host address): pod traffic cannot
 * leave the machine.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GrpcCriClient } from '../../src/cri/index.ts';
import type { Binaries } from './binaries.ts';
import { run } from './exec.ts';
import { ComponentProcess, waitFor } from './process.ts';

export type RuntimeKind = 'containerd2' | 'containerd1';

export interface ContainerdOptions {
  readonly kind: RuntimeKind;
  readonly dir: string;
  readonly bin: Binaries;
  /** Sandbox (pause) image reference, preloaded by the harness. */
  readonly sandboxImage: string;
  /** Registry host:port and the CA that signed its certificate. */
  readonly registryHost: string;
  readonly registryCa: string;
  readonly bridge: string;
  /** e.g. "10.88.3" -> pods in 10.88.3.0/24, gateway .1 on the bridge. */
  readonly subnetPrefix: string;
  /** Pods get a route to it via the gateway (kube-proxy's ClusterIPs), nothing more. */
  readonly serviceCidr?: string;
  readonly detached: boolean;
  /**
   * containerd 2.x only: a second runtime handler, {@link USERNS_HANDLER}, running the runc
   * built from its module, whose idmapped mounts make containerd report user namespace
   * support for it. The default handler stays on Debian's runc (no support).
   */
  readonly usernsHandler?: boolean;
}

/** The runtime handler (and RuntimeClass handler) whose runc supports user namespaces. */
export const USERNS_HANDLER = 'runc-userns';

export interface Containerd {
  readonly kind: RuntimeKind;
  readonly socket: string;
  readonly ctr: string;
  readonly runcRoot: string;
  readonly process: ComponentProcess;
  readonly podSubnet: string;
  /** The bridge's address, the pods' gateway: exists only on this machine. */
  readonly gateway: string;
}

function tomlString(s: string): string {
  return JSON.stringify(s);
}

function configV3(o: ContainerdOptions, p: Paths): string {
  return `version = 3
root = ${tomlString(p.root)}
state = ${tomlString(p.state)}
imports = []
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs",
  "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = ${tomlString(p.socket)}
[ttrpc]
  address = ${tomlString(`${p.socket}.ttrpc`)}

[plugins.'io.containerd.internal.v1.opt']
  path = ${tomlString(join(o.dir, 'opt'))}
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${tomlString(o.sandboxImage)}
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = ${tomlString(p.certsD)}
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = ${tomlString(o.bin.runc)}
        Root = ${tomlString(p.runcRoot)}
        SystemdCgroup = false
${o.usernsHandler === true ? usernsRuntime(o, p) : ''}  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [${tomlString(o.bin.cniBinDir)}]
    conf_dir = ${tomlString(p.cniConfDir)}
`;
}

/** The {@link USERNS_HANDLER} runtime: its own runc binary and state root. */
function usernsRuntime(o: ContainerdOptions, p: Paths): string {
  const table = `plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'${USERNS_HANDLER}'`;
  return `    [${table}]
      runtime_type = 'io.containerd.runc.v2'
      [${table}.options]
        BinaryName = ${tomlString(o.bin.runcUserns)}
        Root = ${tomlString(`${p.runcRoot}-userns`)}
        SystemdCgroup = false
`;
}

function configV2(o: ContainerdOptions, p: Paths): string {
  return `version = 2
root = ${tomlString(p.root)}
state = ${tomlString(p.state)}
imports = []
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = ${tomlString(p.socket)}
[ttrpc]
  address = ${tomlString(`${p.socket}.ttrpc`)}

[plugins."io.containerd.internal.v1.opt"]
  path = ${tomlString(join(o.dir, 'opt'))}
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  sandbox_image = ${tomlString(o.sandboxImage)}
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = ${tomlString(o.bin.runc)}
        Root = ${tomlString(p.runcRoot)}
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${tomlString(o.bin.cniBinDir)}
    conf_dir = ${tomlString(p.cniConfDir)}
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ${tomlString(p.certsD)}
`;
}

interface Paths {
  readonly root: string;
  readonly state: string;
  readonly socket: string;
  readonly runcRoot: string;
  readonly cniConfDir: string;
  readonly ipamDir: string;
  readonly certsD: string;
}

export function containerdPaths(dir: string): Paths {
  return {
    root: join(dir, 'root'),
    state: join(dir, 'state'),
    socket: join(dir, 'containerd.sock'),
    runcRoot: join(dir, 'runc'),
    cniConfDir: join(dir, 'net.d'),
    ipamDir: join(dir, 'ipam'),
    certsD: join(dir, 'certs.d'),
  };
}

async function setUpBridge(name: string, prefix: string): Promise<void> {
  await run('ip', ['link', 'add', name, 'type', 'bridge']);
  await run('ip', ['addr', 'add', `${prefix}.1/24`, 'dev', name]);
  await run('ip', ['link', 'set', name, 'up']);
}

export async function startContainerd(o: ContainerdOptions): Promise<Containerd> {
  const p = containerdPaths(o.dir);
  for (const d of [
    p.root,
    p.state,
    p.runcRoot,
    p.cniConfDir,
    p.ipamDir,
    join(p.certsD, o.registryHost),
  ]) {
    await mkdir(d, { recursive: true });
  }
  await writeFile(
    join(p.certsD, o.registryHost, 'hosts.toml'),
    // The CA goes on the `server` entry (top level) and on the [host] entry: the host is
    // tried first and, on a 404, the server; without the CA there, "not found" would turn
    // into a certificate error. containerd 1.6 needs the [host] table to use TLS at all.
    [
      `server = "https://${o.registryHost}"`,
      `ca = ${tomlString(o.registryCa)}`,
      '',
      `[host."https://${o.registryHost}"]`,
      '  capabilities = ["pull", "resolve"]',
      `  ca = ${tomlString(o.registryCa)}`,
      '',
    ].join('\n'),
  );
  const podSubnet = `${o.subnetPrefix}.0/24`;
  const gateway = `${o.subnetPrefix}.1`;
  await writeFile(
    join(p.cniConfDir, '10-berth.conflist'),
    JSON.stringify(
      {
        cniVersion: '1.0.0',
        name: 'berth',
        plugins: [
          {
            type: 'bridge',
            bridge: o.bridge,
            isGateway: false,
            isDefaultGateway: false,
            ipMasq: false,
            hairpinMode: true,
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: podSubnet, gateway }]],
              ...(o.serviceCidr !== undefined && {
                routes: [{ dst: o.serviceCidr, gw: gateway }],
              }),
              dataDir: p.ipamDir,
            },
          },
          { type: 'portmap', capabilities: { portMappings: true } },
        ],
      },
      null,
      2,
    ),
  );
  if (o.usernsHandler === true && o.kind !== 'containerd2')
    throw new Error('Cannot add the user namespace runtime handler: it needs containerd 2.x');
  await setUpBridge(o.bridge, o.subnetPrefix);
  const config = join(o.dir, 'config.toml');
  await writeFile(config, o.kind === 'containerd2' ? configV3(o, p) : configV2(o, p));
  const binary = o.kind === 'containerd2' ? o.bin.containerd2 : o.bin.containerd1;
  // containerd finds its runc shim on PATH: put the matching one first.
  const shimDir = o.kind === 'containerd2' ? join(o.bin.containerd2Shim, '..') : '/usr/bin';
  const proc = ComponentProcess.start({
    name: o.kind,
    command: binary,
    args: ['--config', config, '--log-level', 'info'],
    logFile: join(o.dir, 'containerd.log'),
    env: { ...process.env, PATH: `${shimDir}:/usr/sbin:/usr/bin:/sbin:/bin` },
    detached: o.detached,
  });
  const client = new GrpcCriClient(p.socket, { defaultTimeoutMs: 2000 });
  let conditions = 'no answer yet';
  try {
    await waitFor(
      `${o.kind} CRI to report ready`,
      async () => {
        if (!proc.alive()) throw new Error(`${o.kind} exited:\n${await proc.tail()}`);
        const status = await client.runtime.status({});
        const list = status.status?.conditions ?? [];
        conditions = list
          .map((c) => `${c.type}=${String(c.status)} ${c.reason} ${c.message}`)
          .join('; ');
        // The kubelet's two required conditions; 2.x adds informational ones (deprecations).
        const ready = (type: string): boolean => list.some((c) => c.type === type && c.status);
        return ready('RuntimeReady') && ready('NetworkReady');
      },
      {
        timeoutMs: 30_000,
        intervalMs: 100,
        describe: async () => `conditions: ${conditions}\n${await proc.tail()}`,
      },
    );
  } finally {
    client.close();
  }
  return {
    kind: o.kind,
    socket: p.socket,
    ctr: o.kind === 'containerd2' ? o.bin.ctr2 : o.bin.ctr1,
    runcRoot: p.runcRoot,
    process: proc,
    podSubnet,
    gateway,
  };
}

/** Imports an OCI archive into the runtime's k8s.io namespace (where CRI looks). */
export async function importImage(
  c: { kind: RuntimeKind; ctr: string; socket: string },
  archive: string,
): Promise<void> {
  // 2.x's ctr imports through the transfer service by default; --local keeps the 1.x path.
  const local = c.kind === 'containerd2' ? ['--local'] : [];
  await run(c.ctr, [
    '--address',
    c.socket,
    '--namespace',
    'k8s.io',
    'images',
    'import',
    ...local,
    archive,
  ]);
}
