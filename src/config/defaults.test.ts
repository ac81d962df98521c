import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { applyDefaults, DEFAULT_EVICTION_HARD } from './defaults.ts';
import { parseKubeletConfigFile } from './kubelet-config.ts';

const HEADER = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';

function fromYaml(body: string, dir: string | null = null) {
  return applyDefaults(parseKubeletConfigFile(HEADER + body, '/c.yaml').file, dir);
}

describe('applyDefaults', () => {
  test('gives upstream v1beta1 defaults without a file', () => {
    const c = applyDefaults(null);
    const expected = {
      syncFrequencyMs: 60_000,
      fileCheckFrequencyMs: 20_000,
      httpCheckFrequencyMs: 20_000,
      nodeStatusUpdateFrequencyMs: 10_000,
      nodeStatusReportFrequencyMs: 300_000,
      nodeLeaseDurationSeconds: 40,
      kubeAPIQPS: 50,
      kubeAPIBurst: 100,
      eventRecordQPS: 50,
      eventBurst: 100,
      registryPullQPS: 5,
      registryBurst: 10,
      serializeImagePulls: true,
      maxParallelImagePulls: null,
      maxPods: 110,
      podPidsLimit: -1,
      evictionPressureTransitionPeriodMs: 300_000,
      imageGCHighThresholdPercent: 85,
      imageGCLowThresholdPercent: 80,
      imageMinimumGCAgeMs: 120_000,
      containerLogMaxSize: '10Mi',
      containerLogMaxFiles: 5,
      runtimeRequestTimeoutMs: 120_000,
      streamingConnectionIdleTimeoutMs: 4 * 3_600_000,
      port: 10250,
      healthzPort: 10248,
      healthzBindAddress: '127.0.0.1',
      readOnlyPort: 0,
      address: '0.0.0.0',
      rotateCertificates: false,
      serverTLSBootstrap: false,
      cgroupDriver: 'cgroupfs',
      cgroupRoot: null,
      cgroupsPerQOS: true,
      clusterDomain: null,
      failSwapOn: true,
      failCgroupV1: null,
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
      imageServiceEndpoint: null,
      staticPodPath: null,
      podLogsDir: '/var/log/pods',
      tlsCertFile: null,
      tlsPrivateKeyFile: null,
      registerNode: true,
      providerID: null,
      shutdownGracePeriodMs: 0,
      shutdownGracePeriodCriticalPodsMs: 0,
      configMapAndSecretChangeDetectionStrategy: 'Watch',
      hairpinMode: 'promiscuous-bridge',
      resolvConf: '/etc/resolv.conf',
      podCIDR: null,
      maxOpenFiles: 1_000_000,
      enableServer: true,
      enableDebuggingHandlers: true,
      oomScoreAdj: -999,
    } as const;
    for (const [key, value] of Object.entries(expected)) {
      assert.deepEqual(c[key as keyof typeof c], value, key);
    }
    assert.deepEqual(c.authentication, {
      x509: { clientCAFile: null },
      webhook: { enabled: true, cacheTTLMs: 120_000 },
      anonymous: { enabled: false },
    });
    assert.deepEqual(c.authorization, {
      mode: 'Webhook',
      webhook: { cacheAuthorizedTTLMs: 300_000, cacheUnauthorizedTTLMs: 30_000 },
    });
    assert.deepEqual(c.evictionHard, DEFAULT_EVICTION_HARD);
    assert.deepEqual(c.enforceNodeAllocatable, ['pods']);
    assert.deepEqual(c.clusterDNS, []);
    assert.deepEqual(c.registerWithTaints, []);
    assert.deepEqual(c.systemReserved, {});
    assert.deepEqual(c.kubeReserved, {});
    assert.deepEqual(c.featureGates, {});
    assert.equal(c.logging.format, 'text');
    assert.equal(c.logging.verbosity, 0);
  });

  test('takes zero as "not set" where upstream does, and keeps it where it is a value', () => {
    const c = fromYaml(
      'syncFrequency: 0s\nmaxPods: 0\nport: 0\nregistryPullQPS: 0\nhealthzPort: 0\nimageGCLowThresholdPercent: 0\n',
    );
    assert.equal(c.syncFrequencyMs, 60_000);
    assert.equal(c.maxPods, 110);
    assert.equal(c.port, 10250);
    assert.equal(c.registryPullQPS, 0);
    assert.equal(c.healthzPort, 0);
    assert.equal(c.imageGCLowThresholdPercent, 0);
  });

  test('reports status as often as it is computed when only nodeStatusUpdateFrequency is set', () => {
    assert.equal(fromYaml('nodeStatusUpdateFrequency: 20s\n').nodeStatusReportFrequencyMs, 20_000);
    const both = fromYaml('nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 1m\n');
    assert.equal(both.nodeStatusReportFrequencyMs, 60_000);
  });

  test('stops serializing pulls when maxParallelImagePulls allows parallel ones', () => {
    assert.equal(fromYaml('maxParallelImagePulls: 3\n').serializeImagePulls, false);
    assert.equal(fromYaml('maxParallelImagePulls: 1\n').serializeImagePulls, true);
  });

  test('replaces the hard eviction defaults unless merging is asked for', () => {
    assert.deepEqual(fromYaml('evictionHard:\n  memory.available: 1Gi\n').evictionHard, {
      'memory.available': '1Gi',
    });
    assert.deepEqual(
      fromYaml('mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 1Gi\n')
        .evictionHard,
      { ...DEFAULT_EVICTION_HARD, 'memory.available': '1Gi' },
    );
  });

  test('volumeStatsAggPeriod: zero is the 1m default, a negative period (collection off) is kept', () => {
    assert.equal(fromYaml('volumeStatsAggPeriod: 0s\n').volumeStatsAggPeriodMs, 60_000);
    assert.equal(fromYaml('volumeStatsAggPeriod: 15s\n').volumeStatsAggPeriodMs, 15_000);
    assert.equal(fromYaml('volumeStatsAggPeriod: -1s\n').volumeStatsAggPeriodMs, -1_000);
  });

  test('folds negative podPidsLimit into -1', () => {
    assert.equal(fromYaml('podPidsLimit: -5\n').podPidsLimit, -1);
    assert.equal(fromYaml('podPidsLimit: 1024\n').podPidsLimit, 1024);
  });

  test('resolves relative paths against the file directory', () => {
    const c = fromYaml(
      'staticPodPath: manifests\ntlsCertFile: /abs/cert.pem\nauthentication:\n  x509:\n    clientCAFile: pki/ca.crt\n',
      '/etc/berth',
    );
    assert.equal(c.staticPodPath, '/etc/berth/manifests');
    assert.equal(c.tlsCertFile, '/abs/cert.pem');
    assert.equal(c.authentication.x509.clientCAFile, '/etc/berth/pki/ca.crt');
  });

  test('treats empty strings as unset', () => {
    const c = fromYaml('containerRuntimeEndpoint: ""\ncgroupDriver: ""\nstaticPodPath: ""\n');
    assert.equal(c.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
    assert.equal(c.cgroupDriver, 'cgroupfs');
    assert.equal(c.staticPodPath, null);
  });
});
