/**
 * A Kubernetes node inside a guest of the VM tier: containerd 2.x (from the image) with
 * the test images imported, berth from the repository's 9p share as a systemd unit
 * joined to the host's control plane, the CNI bridge plugin on the node's pod CIDR, and
 * (opt-in) kube-proxy from the cached Kubernetes build.
 *
 * Guest paths: /etc/berth (config, identity), /var/lib/kubelet (berth's root),
 * /var/log/berth.log, /run/containerd/containerd.sock.
 */
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { buildImages } from '../../hack/images/build.ts';
import { cacheDir, pinnedVersions } from './binaries.ts';
import type { Cluster } from './cluster.ts';
import { CLUSTER_CIDR } from './control-plane.ts';
import { createNodeIdentity } from './node-identity.ts';
import { kubeconfig, type CertPair } from './pki.ts';
import { waitFor } from './process.ts';
import type { Guest } from './vm.ts';
import { SHARES } from './vm-qemu.ts';

export type CgroupDriver = 'systemd' | 'cgroupfs';

export const GUEST_SOCKET = '/run/containerd/containerd.sock';
export const GUEST_BERTH_LOG = '/var/log/berth.log';
export const KUBELET_PORT = 10250;

/** A path under the host's build cache as the guest sees it (the read-only `cache` share). */
export function inGuestCache(hostPath: string): string {
  return join(SHARES.cache, relative(cacheDir(), hostPath));
}

/** containerd 2.x's config for a guest: Debian's runc and CNI plugins, the given cgroup driver. */
export function guestContainerdConfig(o: { driver: CgroupDriver; sandboxImage: string }): string {
  return `version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "${GUEST_SOCKET}"
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${o.sandboxImage}"
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = ${o.driver === 'systemd' ? 'true' : 'false'}
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "/etc/cni/net.d"
`;
}

/** Local names of the images every guest has (imported from the cache share). */
export interface GuestImages {
  readonly pause: string;
  readonly busybox: string;
  readonly grpcHealth: string;
}

/** Writes containerd's config, (re)starts it and imports the test images. */
export async function startGuestContainerd(
  guest: Guest,
  options: { driver?: CgroupDriver } = {},
): Promise<GuestImages> {
  const images = await buildImages();
  await guest.writeFile(
    '/etc/containerd/config.toml',
    guestContainerdConfig({
      driver: options.driver ?? 'systemd',
      sandboxImage: images.pause.localRef,
    }),
  );
  await guest.sh('systemctl restart containerd', { timeoutMs: 300_000 });
  for (const img of [images.pause, images.busybox, images.grpcHealth]) {
    await guest.sh(
      `ctr --address ${GUEST_SOCKET} -n k8s.io images import --local ${inGuestCache(img.archive)} >/dev/null`,
      { timeoutMs: 600_000 },
    );
  }
  return {
    pause: images.pause.localRef,
    busybox: images.busybox.localRef,
    grpcHealth: images.grpcHealth.localRef,
  };
}

export interface GuestBerthOptions {
  readonly driver?: CgroupDriver;
  /** Extra KubeletConfiguration lines (top level, already indented). */
  readonly extraConfig?: readonly string[];
  readonly extraArgs?: readonly string[];
  /** Wait for the Node to be Ready (default true; needs the CNI config: see startGuestNode). */
  readonly waitReady?: boolean;
}

async function copyIdentity(guest: Guest, files: Record<string, string>): Promise<void> {
  for (const [name, hostPath] of Object.entries(files)) {
    await guest.writeFile(`/etc/berth/pki/${name}`, await readFile(hostPath, 'utf8'), 0o600);
  }
}

function guestKubeconfig(server: string, user: string, prefix: string): string {
  const client: CertPair = {
    cert: `/etc/berth/pki/${prefix}.crt`,
    key: `/etc/berth/pki/${prefix}.key`,
  };
  return kubeconfig(server, '/etc/berth/pki/ca.crt', client, user);
}

/** Starts berth in the guest as berth.service, joined to `cluster` as node guest.name. */
export async function startGuestBerth(
  cluster: Cluster,
  guest: Guest,
  options: GuestBerthOptions = {},
): Promise<void> {
  const identity = await createNodeIdentity(cluster, guest.name, {
    extraSans: [`IP:${guest.ip}`],
  });
  await copyIdentity(guest, {
    'ca.crt': identity.caFile,
    'node-client.crt': identity.clientCert.cert,
    'node-client.key': identity.clientCert.key,
    'node-serving.crt': identity.servingCert.cert,
    'node-serving.key': identity.servingCert.key,
  });
  await guest.writeFile(
    '/etc/berth/kubelet.kubeconfig',
    guestKubeconfig(cluster.controlPlane.server, `system:node:${guest.name}`, 'node-client'),
    0o600,
  );
  await guest.writeFile(
    '/etc/berth/config.yaml',
    [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      `containerRuntimeEndpoint: unix://${GUEST_SOCKET}`,
      `cgroupDriver: ${options.driver ?? 'systemd'}`,
      `address: ${guest.ip}`,
      `port: ${KUBELET_PORT}`,
      'tlsCertFile: /etc/berth/pki/node-serving.crt',
      'tlsPrivateKeyFile: /etc/berth/pki/node-serving.key',
      'authentication:',
      '  x509:',
      '    clientCAFile: /etc/berth/pki/ca.crt',
      'failSwapOn: false',
      ...(options.extraConfig ?? []),
      '',
    ].join('\n'),
  );
  const args = [
    '--kubeconfig /etc/berth/kubelet.kubeconfig',
    '--config /etc/berth/config.yaml',
    '--cert-dir /etc/berth/pki',
    `--hostname-override ${guest.name}`,
    `--node-ip ${guest.ip}`,
    '--root-dir /var/lib/kubelet',
    '--v 2',
    ...(options.extraArgs ?? []),
  ];
  await guest.writeFile(
    '/etc/systemd/system/berth.service',
    [
      '[Unit]',
      'Description=berth (the node agent under test)',
      'After=containerd.service',
      'Wants=containerd.service',
      '[Service]',
      // bin/berth's command line, on the JavaScript build vm-cluster.ts made at the start: the
      // launcher would fall back to the .ts sources whenever anyone edits src/ meanwhile.
      `ExecStart=${SHARES.berth}/node_modules/.bin/node --optimize-for-size --heap-growing-percent=25 ${SHARES.berth}/.build/src/cmd/berth.js ${args.join(' ')}`,
      `StandardOutput=append:${GUEST_BERTH_LOG}`,
      `StandardError=append:${GUEST_BERTH_LOG}`,
      'Restart=no',
      // berth stops pods itself on shutdown; systemd must not kill them under it.
      'KillMode=process',
      '',
    ].join('\n'),
  );
  await guest.sh('systemctl daemon-reload && systemctl start berth');
  await waitFor(
    `node ${guest.name} registered`,
    async () => {
      const out = await cluster.kubectl(['get', 'node', guest.name, '-o', 'name']).catch(() => '');
      return out.trim() !== '';
    },
    { timeoutMs: 600_000, intervalMs: 2000, describe: () => berthLogTail(guest) },
  );
}

/** The last lines of berth's log in the guest (for failure messages). */
export async function berthLogTail(guest: Guest, lines = 40): Promise<string> {
  const r = await guest.exec(`tail -n ${lines} ${GUEST_BERTH_LOG}`).catch(() => undefined);
  return r?.stdout ?? '';
}

/** The node's pod CIDR, once kube-controller-manager allocated it. */
export async function nodePodCidr(cluster: Cluster, nodeName: string): Promise<string> {
  let cidr = '';
  await waitFor(
    `the pod CIDR of ${nodeName}`,
    async () => {
      cidr = (
        await cluster.kubectl(['get', 'node', nodeName, '-o', 'jsonpath={.spec.podCIDR}'])
      ).trim();
      return cidr !== '';
    },
    { timeoutMs: 120_000, intervalMs: 1000 },
  );
  return cidr;
}

/**
 * The CNI bridge plugin on the node's pod CIDR (what a simple CNI setup does), plus a
 * masquerade of pod traffic to the host's bridge address only (the apiserver), whose
 * host has no route back to pod CIDRs.
 */
export async function configureGuestCni(guest: Guest, podCidr: string, hostIp: string) {
  await guest.writeFile(
    '/etc/cni/net.d/10-berth.conflist',
    JSON.stringify(
      {
        cniVersion: '1.0.0',
        name: 'berth',
        plugins: [
          {
            type: 'bridge',
            bridge: 'cni0',
            isGateway: true,
            ipMasq: false,
            hairpinMode: true,
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: podCidr }]],
              routes: [{ dst: '0.0.0.0/0' }],
            },
          },
          { type: 'portmap', capabilities: { portMappings: true } },
        ],
      },
      null,
      2,
    ),
  );
  await guest.sh(
    `iptables -t nat -C POSTROUTING -s ${podCidr} -d ${hostIp}/32 -j MASQUERADE 2>/dev/null || ` +
      `iptables -t nat -A POSTROUTING -s ${podCidr} -d ${hostIp}/32 -j MASQUERADE`,
  );
}

/** Routes every other node's pod CIDR via that node's bridge address. */
export async function routePodCidrs(
  nodes: readonly { guest: Guest; podCidr: string }[],
): Promise<void> {
  for (const self of nodes) {
    for (const other of nodes) {
      if (other === self) continue;
      await self.guest.sh(`ip route replace ${other.podCidr} via ${other.guest.ip} dev eth1`);
    }
  }
}

/** kube-proxy (iptables mode) in the guest as kube-proxy.service. */
export async function startGuestKubeProxy(cluster: Cluster, guest: Guest): Promise<void> {
  await copyIdentity(guest, {
    'kube-proxy.crt': cluster.pki.kubeProxy.cert,
    'kube-proxy.key': cluster.pki.kubeProxy.key,
  });
  await guest.writeFile(
    '/etc/berth/kube-proxy.kubeconfig',
    guestKubeconfig(cluster.controlPlane.server, 'system:kube-proxy', 'kube-proxy'),
    0o600,
  );
  await guest.writeFile(
    '/etc/berth/kube-proxy.yaml',
    [
      'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
      'kind: KubeProxyConfiguration',
      'mode: iptables',
      'clientConnection:',
      '  kubeconfig: /etc/berth/kube-proxy.kubeconfig',
      `hostnameOverride: ${guest.name}`,
      `bindAddress: ${guest.ip}`,
      `clusterCIDR: ${CLUSTER_CIDR}`,
      'detectLocalMode: ClusterCIDR',
      'enableProfiling: false',
      '',
    ].join('\n'),
  );
  const k8s = join(cacheDir(), 'bin', `kubernetes-${pinnedVersions()['KUBERNETES_VERSION'] ?? ''}`);
  await guest.writeFile(
    '/etc/systemd/system/kube-proxy.service',
    [
      '[Unit]',
      'Description=kube-proxy',
      '[Service]',
      `ExecStart=${inGuestCache(join(k8s, 'kube-proxy'))} --config /etc/berth/kube-proxy.yaml`,
      'StandardOutput=append:/var/log/kube-proxy.log',
      'StandardError=append:/var/log/kube-proxy.log',
      '',
    ].join('\n'),
  );
  await guest.sh('systemctl daemon-reload && systemctl start kube-proxy');
}

/** Everything a node needs: containerd, berth, its pod network; Ready in the API. */
export async function startGuestNode(
  cluster: Cluster,
  guest: Guest,
  hostIp: string,
  options: GuestBerthOptions & { kubeProxy?: boolean } = {},
): Promise<{ images: GuestImages; podCidr: string }> {
  const images = await startGuestContainerd(guest, {
    ...(options.driver !== undefined && { driver: options.driver }),
  });
  await startGuestBerth(cluster, guest, options);
  const podCidr = await nodePodCidr(cluster, guest.name);
  await configureGuestCni(guest, podCidr, hostIp);
  if (options.kubeProxy === true) await startGuestKubeProxy(cluster, guest);
  if (options.waitReady !== false) {
    await waitFor(
      `node ${guest.name} Ready`,
      async () => {
        const s = await cluster.kubectl([
          'get',
          'node',
          guest.name,
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
        ]);
        return s.trim() === 'True';
      },
      { timeoutMs: 600_000, intervalMs: 2000, describe: () => berthLogTail(guest) },
    );
  }
  return { images, podCidr };
}
