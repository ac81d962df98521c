import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { kernelHostname, podHostnameAndDomain, PodHostnameError } from './hostname.ts';

function pod(name: string, spec: Partial<NonNullable<Pod['spec']>> = {}): Pod {
  return { metadata: { name, namespace: 'team' }, spec: { containers: [], ...spec } };
}

describe('pod hostname', () => {
  test('spec.hostname wins over the pod name; subdomain gives the domain', () => {
    assert.deepEqual(podHostnameAndDomain(pod('web-0'), 'cluster.local'), {
      hostname: 'web-0',
      domain: '',
    });
    assert.deepEqual(
      podHostnameAndDomain(pod('web-0', { hostname: 'db', subdomain: 'svc' }), 'cluster.local'),
      { hostname: 'db', domain: 'svc.team.svc.cluster.local' },
    );
  });

  test('a long pod name is cut to 63 characters without a trailing dash or dot', () => {
    const name = `${'a'.repeat(61)}--b${'c'.repeat(10)}`;
    const { hostname } = podHostnameAndDomain(pod(name), 'cluster.local');
    assert.equal(hostname, 'a'.repeat(61));
  });

  test('the kernel hostname is the FQDN only with setHostnameAsFQDN and a subdomain', () => {
    assert.equal(kernelHostname(pod('web', { subdomain: 's' }), 'cluster.local'), 'web');
    assert.equal(kernelHostname(pod('web', { setHostnameAsFQDN: true }), 'cluster.local'), 'web');
    assert.equal(
      kernelHostname(pod('web', { subdomain: 's', setHostnameAsFQDN: true }), 'cluster.local'),
      'web.s.team.svc.cluster.local',
    );
  });

  test('an FQDN over 64 characters is refused with the upstream message', () => {
    const long = pod('x'.repeat(40), { subdomain: 'sub', setHostnameAsFQDN: true });
    const fqdn = `${'x'.repeat(40)}.sub.team.svc.cluster.local`;
    assert.throws(
      () => kernelHostname(long, 'cluster.local'),
      (err: unknown) =>
        err instanceof PodHostnameError &&
        err.code === 'BERTH_POD_HOSTNAME' &&
        err.message ===
          `failed to construct FQDN from pod hostname and cluster domain, FQDN ${fqdn} is too long (64 characters is the max, ${fqdn.length} characters requested)`,
    );
    // Exactly 64 is allowed.
    const edge = pod('y'.repeat(37), { subdomain: 'sub', setHostnameAsFQDN: true });
    assert.equal(kernelHostname(edge, 'cluster.local').length, 64);
  });
});
