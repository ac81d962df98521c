/**
 * berth takes the files kubeadm writes as they are: the KubeletConfiguration of kubeadm
 * v1.37.2 (testdata, printed by that kubeadm) with the flags of its systemd drop-in and
 * kubeadm-flags.env. Nothing in it may be refused (src/config/unsupported.ts), and its
 * zero durations ("0s", kubeadm's marshalled empties) must default as upstream's do.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { loadConfig } from './load.ts';

const FIXTURE = new URL('./testdata/kubeadm-v1.37.2-config.yaml', import.meta.url).pathname;
const ARGS = [
  // The drop-in's command line (10-kubeadm.conf) ...
  '--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf',
  '--kubeconfig=/etc/kubernetes/kubelet.conf',
  '--config=/var/lib/kubelet/config.yaml',
  // ... then KUBELET_KUBEADM_ARGS as `kubeadm init` writes it for a named node.
  '--container-runtime-endpoint=unix:///run/containerd/containerd.sock',
  '--hostname-override=cp-1',
  '--node-ip=10.0.0.5',
];

describe("kubeadm's kubelet files", () => {
  it('load without a refusal, with upstream defaults for the zero durations', async () => {
    const text = await readFile(FIXTURE, 'utf8');
    const c = await loadConfig(ARGS, {
      readFile: (path) =>
        path === '/var/lib/kubelet/config.yaml'
          ? Promise.resolve(text)
          : Promise.reject(new Error(`ENOENT: ${path}`)),
      hostname: () => 'machine',
    });
    const k = c.kubelet;
    assert.equal(c.kubeconfig, '/etc/kubernetes/kubelet.conf');
    assert.equal(c.bootstrapKubeconfig, '/etc/kubernetes/bootstrap-kubelet.conf');
    assert.equal(c.nodeName, 'cp-1');
    assert.deepEqual(c.nodeIPs, ['10.0.0.5']);
    // No serving pair and no serverTLSBootstrap: the self-signed pair in the cert dir.
    assert.equal(c.certDir, '/var/lib/kubelet/pki');
    assert.equal(k.tlsCertFile, null);
    assert.equal(k.tlsPrivateKeyFile, null);
    assert.equal(k.serverTLSBootstrap, false);
    assert.equal(k.rotateCertificates, true);
    assert.equal(k.staticPodPath, '/etc/kubernetes/manifests');
    assert.equal(k.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
    assert.equal(k.authentication.x509.clientCAFile, '/etc/kubernetes/pki/ca.crt');
    assert.equal(k.authentication.webhook.enabled, true);
    assert.equal(k.authentication.anonymous.enabled, false);
    assert.equal(k.authorization.mode, 'Webhook');
    assert.deepEqual(k.clusterDNS, ['10.96.0.10']);
    assert.equal(k.clusterDomain, 'cluster.local');
    assert.equal(k.healthzBindAddress, '127.0.0.1');
    assert.equal(k.healthzPort, 10248);
    // systemd as written; the driver in use comes from the runtime (RuntimeConfig), as upstream.
    assert.equal(k.cgroupDriver, 'systemd');
    // "0s" is unset: upstream's defaults apply (SetDefaults_KubeletConfiguration).
    assert.equal(k.syncFrequencyMs, 60_000);
    assert.equal(k.fileCheckFrequencyMs, 20_000);
    assert.equal(k.httpCheckFrequencyMs, 20_000);
    assert.equal(k.nodeStatusUpdateFrequencyMs, 10_000);
    assert.equal(k.nodeStatusReportFrequencyMs, 300_000);
    assert.equal(k.runtimeRequestTimeoutMs, 120_000);
    assert.equal(k.streamingConnectionIdleTimeoutMs, 14_400_000);
    assert.equal(k.evictionPressureTransitionPeriodMs, 300_000);
    assert.equal(k.imageMinimumGCAgeMs, 120_000);
    assert.equal(k.authentication.webhook.cacheTTLMs, 120_000);
    assert.equal(k.authorization.webhook.cacheAuthorizedTTLMs, 300_000);
    assert.equal(k.authorization.webhook.cacheUnauthorizedTTLMs, 30_000);
    assert.equal(k.shutdownGracePeriodMs, 0);
  });
});
