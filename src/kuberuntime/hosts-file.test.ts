import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { hostsFileContent, mountsHostsFile } from './hosts-file.ts';

const LOCAL =
  '# Kubernetes-managed hosts file.\n' +
  '127.0.0.1\tlocalhost\n' +
  '::1\tlocalhost ip6-localhost ip6-loopback\n' +
  'fe00::0\tip6-localnet\n' +
  'fe00::0\tip6-mcastprefix\n' +
  'fe00::1\tip6-allnodes\n' +
  'fe00::2\tip6-allrouters\n';

const pod = (spec: Partial<Pod['spec']> = {}): Pod => ({
  metadata: { name: 'web-0', namespace: 'shop' },
  spec: { containers: [{ name: 'c' }], ...spec },
});

describe('hostsFileContent', () => {
  it('lists localhost and the pod IPs with the hostname', () => {
    const text = hostsFileContent(pod(), {
      podIPs: ['10.244.0.5', 'fd00::5'],
      hostname: 'web-0',
      domain: '',
    });
    assert.equal(text, `${LOCAL}10.244.0.5\tweb-0\nfd00::5\tweb-0\n`);
  });

  it('adds the FQDN when the pod has a domain', () => {
    const text = hostsFileContent(pod({ subdomain: 'db' }), {
      podIPs: ['10.244.0.5'],
      hostname: 'h',
      domain: 'db.shop.svc.cluster.local',
    });
    assert.equal(text, `${LOCAL}10.244.0.5\th.db.shop.svc.cluster.local\th\n`);
  });

  it('appends hostAliases, one line per IP', () => {
    const text = hostsFileContent(
      pod({
        hostAliases: [
          { ip: '1.2.3.4', hostnames: ['foo.local', 'bar.local'] },
          { ip: '::2', hostnames: ['six'] },
        ],
      }),
      { podIPs: ['10.244.0.5'], hostname: 'web-0', domain: '' },
    );
    assert.equal(
      text,
      `${LOCAL}10.244.0.5\tweb-0\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo.local\tbar.local\n::2\tsix\n`,
    );
  });

  it("copies the node's file for hostNetwork pods, with hostAliases", () => {
    const node = '127.0.0.1 localhost\n192.168.1.2 node-1\n';
    const hostNet = pod({ hostNetwork: true, hostAliases: [{ ip: '5.6.7.8', hostnames: ['x'] }] });
    assert.equal(
      hostsFileContent(hostNet, {
        podIPs: ['192.168.1.2'],
        hostname: 'node-1',
        domain: '',
        nodeHostsFile: node,
      }),
      `# Kubernetes-managed hosts file (host network).\n${node}\n# Entries added by HostAliases.\n5.6.7.8\tx\n`,
    );
    assert.throws(() => hostsFileContent(hostNet, { podIPs: [], hostname: 'h', domain: '' }), {
      code: 'BERTH_HOSTS_FILE_NO_NODE_HOSTS',
    });
  });
});

describe('mountsHostsFile', () => {
  it('mounts only with pod IPs and without a container mount on /etc/hosts', () => {
    assert.equal(mountsHostsFile({ name: 'c' }, ['10.0.0.1']), true);
    assert.equal(mountsHostsFile({ name: 'c' }, []), false);
    assert.equal(
      mountsHostsFile({ name: 'c', volumeMounts: [{ name: 'v', mountPath: '/etc/hosts' }] }, [
        '10.0.0.1',
      ]),
      false,
    );
  });
});
