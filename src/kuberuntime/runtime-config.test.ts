import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { podHostsFile } from './hosts-file.ts';
import { sandboxConfig, type RuntimeConfigOptions } from './runtime-config.ts';

const options: RuntimeConfigOptions = {
  podLogsDir: '/var/log/pods',
  cgroupRoot: '/',
  cgroupsPerQOS: true,
  nodeName: 'node-a',
  clusterDomain: 'cluster.local',
  dns: () => undefined,
};
const node = { nodeIPs: ['192.168.1.2'], nodeName: 'node-a', clusterDomain: 'cluster.local' };

function pod(spec: Partial<NonNullable<Pod['spec']>> & { hostnameOverride?: string }): Pod {
  return {
    metadata: { name: 'web-0', namespace: 'shop', uid: 'u1' },
    spec: { containers: [{ name: 'c' }], ...spec },
  };
}

describe('the pod hostname in the sandbox and /etc/hosts', () => {
  test('spec.hostnameOverride is the sandbox hostname and the only /etc/hosts name', () => {
    const p = pod({ hostname: 'custom-host', subdomain: 't', hostnameOverride: 'override-host' });
    assert.equal(sandboxConfig(p, 0, options).hostname, 'override-host');
    const hosts = podHostsFile(p, ['10.244.0.5'], node, '');
    assert.match(hosts, /\n10\.244\.0\.5\toverride-host\n$/);
    const dotted = pod({ hostnameOverride: 'override.example.host' });
    assert.equal(sandboxConfig(dotted, 0, options).hostname, 'override.example.host');
    assert.match(
      podHostsFile(dotted, ['10.244.0.5'], node, ''),
      /\n10\.244\.0\.5\toverride\.example\.host\n$/,
    );
  });

  test('without an override: hostname and subdomain give the FQDN line', () => {
    const p = pod({ hostname: 'db', subdomain: 't', setHostnameAsFQDN: true });
    assert.equal(sandboxConfig(p, 0, options).hostname, 'db.t.shop.svc.cluster.local');
    assert.match(
      podHostsFile(p, ['10.244.0.5'], node, ''),
      /\n10\.244\.0\.5\tdb\.t\.shop\.svc\.cluster\.local\tdb\n$/,
    );
  });

  test('a hostNetwork pod sets no hostname and gets the node file', () => {
    const p = pod({ hostNetwork: true });
    assert.equal(sandboxConfig(p, 0, options).hostname, '');
    assert.equal(
      podHostsFile(p, [], node, '127.0.0.1 localhost\n'),
      '# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n',
    );
  });
});

describe('user namespaces', () => {
  test('hostUsers: false is refused, never run in the host user namespace', () => {
    assert.throws(() => sandboxConfig(pod({ hostUsers: false }), 0, options), {
      code: 'BERTH_USERNS_UNSUPPORTED',
      message: "can't set `spec.hostUsers: false`, berth does not create user namespaces yet",
    });
    assert.doesNotThrow(() => sandboxConfig(pod({ hostUsers: true }), 0, options));
  });
});
