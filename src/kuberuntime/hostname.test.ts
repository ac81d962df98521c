import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { kernelHostname, podHostnameAndDomain, PodHostnameError } from './hostname.ts';

type Spec = Partial<NonNullable<Pod['spec']>> & { hostnameOverride?: string };

function pod(name: string, spec: Spec = {}): Pod {
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

  test('hostnameOverride wins over hostname and subdomain, and leaves no domain', () => {
    const override = (spec: Spec) => podHostnameAndDomain(pod('web-0', spec), 'cluster.local');
    assert.deepEqual(override({ hostnameOverride: 'override.example.host' }), {
      hostname: 'override.example.host',
      domain: '',
    });
    assert.deepEqual(override({ hostname: 'custom-host', hostnameOverride: 'override-host' }), {
      hostname: 'override-host',
      domain: '',
    });
    // Upstream's e2e: `hostname -f` is the override too, so no <name>.<subdomain> FQDN.
    assert.deepEqual(override({ subdomain: 't', hostnameOverride: 'override-host' }), {
      hostname: 'override-host',
      domain: '',
    });
    assert.equal(
      kernelHostname(pod('web-0', { subdomain: 't', hostnameOverride: 'o' }), 'cluster.local'),
      'o',
    );
    // A long override is cut as a long pod name is (63 characters, no trailing '.').
    const long = `${'a'.repeat(62)}.b${'c'.repeat(10)}`;
    assert.equal(override({ hostnameOverride: long }).hostname, 'a'.repeat(62));
  });

  test('names the API should have refused fail with upstream messages', () => {
    const fails = (spec: Spec, message: string): void => {
      assert.throws(
        () => podHostnameAndDomain(pod('web-0', spec), 'cluster.local'),
        (err: unknown) =>
          err instanceof PodHostnameError &&
          err.code === 'BERTH_POD_HOSTNAME' &&
          err.message === message,
      );
    };
    fails(
      { hostnameOverride: 'Not-RFC1123' },
      `pod HostnameOverride "Not-RFC1123" is not a valid DNS subdomain: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
    );
    fails(
      { hostname: 'a.b' },
      'pod Hostname "a.b" is not a valid DNS label: must not contain dots',
    );
    fails(
      { subdomain: 'S_' },
      `pod Subdomain "S_" is not a valid DNS label: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
    );
  });
});
