/**
 * The kubeadm configuration of the kubeadm test: kubeadm's defaults except where this
 * machine or the test's isolation needs otherwise, each with its reason.
 */
import { kubeProxyConfig } from '../harness/kube-proxy.ts';

export interface KubeadmConfigOptions {
  readonly nodeName: string;
  readonly kubernetesVersion: string;
  /** The pod bridge's gateway: exists only on this machine (the API's advertised address). */
  readonly advertiseAddress: string;
  readonly criSocket: string;
  /** Where the kubelet makes its kubepods cgroups (removed by the test's teardown). */
  readonly cgroupRoot: string;
  readonly podSubnet: string;
  readonly ignorePreflightErrors: readonly string[];
}

/** kubeadm's default Service subnet; the pod bridge routes it to the gateway. */
export const SERVICE_SUBNET = '10.96.0.0/12';

export function kubeadmConfig(o: KubeadmConfigOptions): string {
  return [
    'apiVersion: kubeadm.k8s.io/v1beta4',
    'kind: InitConfiguration',
    'localAPIEndpoint:',
    `  advertiseAddress: ${o.advertiseAddress}`,
    '  bindPort: 6443',
    'nodeRegistration:',
    `  name: ${o.nodeName}`,
    `  criSocket: unix://${o.criSocket}`,
    // Every image is built here and preloaded; nothing may be pulled from the internet.
    '  imagePullPolicy: Never',
    '  ignorePreflightErrors:',
    ...o.ignorePreflightErrors.map((e) => `  - ${e}`),
    '---',
    'apiVersion: kubeadm.k8s.io/v1beta4',
    'kind: ClusterConfiguration',
    `kubernetesVersion: ${o.kubernetesVersion}`,
    'networking:',
    `  serviceSubnet: ${SERVICE_SUBNET}`,
    '---',
    'apiVersion: kubelet.config.k8s.io/v1beta1',
    'kind: KubeletConfiguration',
    // The test's pods in a cgroup of their own, which teardown removes and checks.
    `cgroupRoot: ${o.cgroupRoot}`,
    '---',
    // The harness's KubeProxyConfiguration: nothing in it changes a host-wide sysctl, and
    // NodePorts open only on the gateway (kube-proxy.ts explains each field).
    kubeProxyConfig({
      kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf',
      nodeName: o.nodeName,
      podSubnet: o.podSubnet,
      gateway: o.advertiseAddress,
      healthzPort: 10256,
      metricsPort: 10249,
    }),
  ].join('\n');
}
