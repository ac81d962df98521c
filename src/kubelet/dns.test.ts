import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { parseResolvConf, podDnsConfig, type DnsEvents } from './dns.ts';

const host = parseResolvConf('nameserver 192.0.2.53\nsearch example.org\noptions edns0\n');
const pod = (spec: Partial<NonNullable<Pod['spec']>>): Pod => ({
  metadata: { name: 'p', namespace: 'ns', uid: 'u-1' },
  spec: { containers: [], ...spec },
});
const cluster = { host, clusterDNS: ['10.96.0.10'], clusterDomain: 'cluster.local' };

/** Records events as `<target> <reason>: <message>`. */
function recording(): { events: DnsEvents; seen: string[] } {
  const seen: string[] = [];
  return {
    seen,
    events: {
      pod: (reason, message) => seen.push(`pod ${reason}: ${message}`),
      node: (reason, message) => seen.push(`node ${reason}: ${message}`),
    },
  };
}

test('ClusterFirst: cluster DNS, namespace search path, ndots:5', () => {
  assert.deepEqual(podDnsConfig(pod({}), cluster), {
    servers: ['10.96.0.10'],
    searches: ['ns.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'example.org'],
    options: ['ndots:5'],
  });
});

test('hostNetwork: ClusterFirst falls back to the node; ClusterFirstWithHostNet does not', () => {
  assert.deepEqual(podDnsConfig(pod({ hostNetwork: true }), cluster).servers, ['192.0.2.53']);
  assert.deepEqual(
    podDnsConfig(pod({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' }), cluster).servers,
    ['10.96.0.10'],
  );
});

test('dnsConfig options override by name; limits cut with a warning', () => {
  const { events, seen } = recording();
  const c = podDnsConfig(
    pod({
      dnsConfig: {
        nameservers: ['10.0.0.1', '10.0.0.2', '10.0.0.3'],
        searches: Array.from({ length: 40 }, (_, i) => `d${i}.test`),
        options: [{ name: 'ndots', value: '2' }, { name: 'rotate' }],
      },
    }),
    { ...cluster, events },
  );
  assert.deepEqual(c.options, ['ndots:2', 'rotate']);
  assert.equal(c.servers.length, 3);
  assert.equal(c.searches.length, 32);
  assert.equal(seen.length, 2);
  assert.match(
    seen[0] ?? '',
    /^pod DNSConfigForming: Nameserver limits were exceeded, .*: 10\.96\.0\.10 10\.0\.0\.1 10\.0\.0\.2$/,
  );
  assert.match(seen[1] ?? '', /^pod DNSConfigForming: Search Line limits were exceeded/);
});

test('ClusterFirst without clusterDNS: the node resolv.conf and a MissingClusterDNS warning', () => {
  const { events, seen } = recording();
  const noDNS = { host, clusterDNS: [], clusterDomain: 'cluster.local', events };
  assert.deepEqual(podDnsConfig(pod({}), noDNS), {
    servers: ['192.0.2.53'],
    searches: ['example.org'],
    options: ['edns0'],
  });
  const node =
    'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.';
  assert.deepEqual(seen, [
    `node MissingClusterDNS: ${node}`,
    `pod MissingClusterDNS: pod: "p_ns(u-1)". ${node}`,
  ]);
  // ClusterFirstWithHostNet is ClusterFirst, on the host network or not.
  seen.length = 0;
  podDnsConfig(pod({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' }), noDNS);
  podDnsConfig(pod({ dnsPolicy: 'ClusterFirstWithHostNet' }), noDNS);
  assert.equal(seen.filter((e) => e.startsWith('pod MissingClusterDNS')).length, 2);
  // Policies that never wanted the cluster's DNS are not warned about.
  seen.length = 0;
  podDnsConfig(pod({ hostNetwork: true }), noDNS);
  podDnsConfig(pod({ dnsPolicy: 'Default' }), noDNS);
  podDnsConfig(pod({ dnsPolicy: 'None', dnsConfig: { nameservers: ['10.9.9.9'] } }), noDNS);
  assert.deepEqual(seen, []);
  // With clusterDNS, none either.
  podDnsConfig(pod({}), { ...cluster, events });
  assert.deepEqual(seen, []);
});
