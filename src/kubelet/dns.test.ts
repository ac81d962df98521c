import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { parseResolvConf, podDnsConfig } from './dns.ts';

const host = parseResolvConf('nameserver 192.0.2.53\nsearch example.org\noptions edns0\n');
const pod = (spec: Partial<NonNullable<Pod['spec']>>): Pod => ({
  metadata: { name: 'p', namespace: 'ns' },
  spec: { containers: [], ...spec },
});

test('ClusterFirst: cluster DNS, namespace search path, ndots:5', () => {
  assert.deepEqual(podDnsConfig(pod({}), host, ['10.96.0.10'], 'cluster.local'), {
    servers: ['10.96.0.10'],
    searches: ['ns.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'example.org'],
    options: ['ndots:5'],
  });
});

test('hostNetwork: ClusterFirst falls back to the node; ClusterFirstWithHostNet does not', () => {
  assert.deepEqual(
    podDnsConfig(pod({ hostNetwork: true }), host, ['10.96.0.10'], 'cluster.local').servers,
    ['192.0.2.53'],
  );
  assert.deepEqual(
    podDnsConfig(
      pod({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' }),
      host,
      ['10.96.0.10'],
      'cluster.local',
    ).servers,
    ['10.96.0.10'],
  );
});

test('dnsConfig options override by name; limits cut with a warning', () => {
  const warnings: string[] = [];
  const c = podDnsConfig(
    pod({
      dnsConfig: {
        nameservers: ['10.0.0.1', '10.0.0.2', '10.0.0.3'],
        searches: Array.from({ length: 40 }, (_, i) => `d${i}.test`),
        options: [{ name: 'ndots', value: '2' }, { name: 'rotate' }],
      },
    }),
    host,
    ['10.96.0.10'],
    'cluster.local',
    (m) => warnings.push(m),
  );
  assert.deepEqual(c.options, ['ndots:2', 'rotate']);
  assert.equal(c.servers.length, 3);
  assert.equal(c.searches.length, 32);
  assert.equal(warnings.length, 2);
  assert.match(
    warnings[0] ?? '',
    /^Nameserver limits were exceeded, .*: 10\.96\.0\.10 10\.0\.0\.1 10\.0\.0\.2$/,
  );
  assert.match(warnings[1] ?? '', /^Search Line limits were exceeded/);
});
