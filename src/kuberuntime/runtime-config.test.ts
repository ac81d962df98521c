import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import { nodeUserNamespace, podUserNamespace } from '../userns/types.ts';
import { podHostsFile } from './hosts-file.ts';
import { containerConfig, sandboxConfig, type RuntimeConfigOptions } from './runtime-config.ts';

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

const POD_NS = podUserNamespace(131072, 65536);

function container(pod: Pod, c: Container, userns?: cri.UserNamespace): cri.ContainerConfig {
  const mount = cri.Mount.fromPartial({ containerPath: '/data', hostPath: '/var/lib/x' });
  return containerConfig(pod, c, 0, 'img', [], [mount], {}, undefined, userns);
}

describe('user namespaces', () => {
  test("the sandbox and its containers carry the pod's user namespace, mounts idmapped", () => {
    const p = pod({ hostUsers: false });
    const sc = sandboxConfig(p, 0, options, POD_NS).linux?.securityContext;
    assert.deepEqual(sc?.namespaceOptions?.usernsOptions, POD_NS);
    const c = container(p, { name: 'c' }, POD_NS);
    assert.deepEqual(c.linux?.securityContext?.namespaceOptions?.usernsOptions, POD_NS);
    assert.deepEqual(c.mounts[0]?.uidMappings, [{ hostId: 131072, containerId: 0, length: 65536 }]);
    assert.deepEqual(c.mounts[0]?.gidMappings, [{ hostId: 131072, containerId: 0, length: 65536 }]);
  });

  test('hostUsers unset: the node user namespace, mounts as they are', () => {
    const p = pod({});
    const sc = sandboxConfig(p, 0, options, nodeUserNamespace()).linux?.securityContext;
    assert.equal(sc?.namespaceOptions?.usernsOptions?.mode, cri.NamespaceMode.NODE);
    const c = container(p, { name: 'c' }, nodeUserNamespace());
    assert.deepEqual(c.mounts[0]?.uidMappings, []);
  });

  test('hostUsers: false without a pod user namespace is refused, never run in the host one', () => {
    const p = pod({ hostUsers: false });
    for (const userns of [undefined, nodeUserNamespace()]) {
      assert.throws(() => sandboxConfig(p, 0, options, userns), { code: 'BERTH_USERNS_MISSING' });
      assert.throws(() => container(p, { name: 'c' }, userns), { code: 'BERTH_USERNS_MISSING' });
    }
  });
});

describe('procMount', () => {
  const masked = (c: cri.ContainerConfig) => c.linux?.securityContext?.maskedPaths ?? [];
  const readonly = (c: cri.ContainerConfig) => c.linux?.securityContext?.readonlyPaths ?? [];

  test('Unmasked in a user namespace pod: nothing masked or read-only', () => {
    const c = container(
      pod({ hostUsers: false }),
      { name: 'c', securityContext: { procMount: 'Unmasked' } },
      POD_NS,
    );
    assert.deepEqual(masked(c), []);
    assert.deepEqual(readonly(c), []);
  });

  test('Default (or unset): the default masked and read-only paths', () => {
    for (const procMount of ['Default', undefined]) {
      const c = container(
        pod({ hostUsers: false }),
        { name: 'c', securityContext: { ...(procMount !== undefined && { procMount }) } },
        POD_NS,
      );
      assert.ok(masked(c).includes('/proc/kcore'));
      assert.ok(readonly(c).includes('/proc/sys'));
    }
  });

  test("Unmasked on the host's user namespace, or an unknown type, is refused in the API's words", () => {
    assert.throws(
      () => container(pod({}), { name: 'c', securityContext: { procMount: 'Unmasked' } }),
      {
        code: 'BERTH_PROCMOUNT_INVALID',
        message:
          'securityContext.procMount: Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`',
      },
    );
    assert.throws(
      () =>
        container(
          pod({ hostUsers: false }),
          { name: 'c', securityContext: { procMount: 'Open' } },
          POD_NS,
        ),
      { message: /^securityContext\.procMount: Unsupported value: "Open"/ },
    );
  });
});
