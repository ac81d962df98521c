import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod, Service, ServicePort } from 'kubernetes-types/core/v1.js';
import {
  hasClusterIP,
  serviceEnv,
  serviceEnvName,
  servicesForPod,
  serviceVariables,
} from './service-env.ts';

function svc(
  ns: string,
  name: string,
  clusterIP: string,
  ports: ServicePort[] = [{ port: 80 }],
): Service {
  return { metadata: { namespace: ns, name }, spec: { clusterIP, ports } };
}
const pod = (ns: string, enableServiceLinks?: boolean): Pod => ({
  metadata: { namespace: ns, name: 'p' },
  spec: { containers: [], ...(enableServiceLinks === undefined ? {} : { enableServiceLinks }) },
});

describe('serviceVariables', () => {
  it('makes the docker-link variables in upstream order', () => {
    const s = svc('ns', 'my-db', '10.0.0.7', [
      { port: 5432, name: 'sql' },
      { port: 53, protocol: 'UDP', name: 'dns-udp' },
    ]);
    assert.deepEqual(serviceVariables(s), [
      ['MY_DB_SERVICE_HOST', '10.0.0.7'],
      ['MY_DB_SERVICE_PORT', '5432'],
      ['MY_DB_SERVICE_PORT_SQL', '5432'],
      ['MY_DB_SERVICE_PORT_DNS_UDP', '53'],
      ['MY_DB_PORT', 'tcp://10.0.0.7:5432'],
      ['MY_DB_PORT_5432_TCP', 'tcp://10.0.0.7:5432'],
      ['MY_DB_PORT_5432_TCP_PROTO', 'tcp'],
      ['MY_DB_PORT_5432_TCP_PORT', '5432'],
      ['MY_DB_PORT_5432_TCP_ADDR', '10.0.0.7'],
      ['MY_DB_PORT_53_UDP', 'udp://10.0.0.7:53'],
      ['MY_DB_PORT_53_UDP_PROTO', 'udp'],
      ['MY_DB_PORT_53_UDP_PORT', '53'],
      ['MY_DB_PORT_53_UDP_ADDR', '10.0.0.7'],
    ]);
  });

  it('brackets IPv6 cluster IPs in URLs only', () => {
    const vars = new Map(
      serviceVariables(svc('ns', 'v6', 'fd00::10', [{ port: 443, protocol: 'SCTP' }])),
    );
    assert.equal(vars.get('V6_PORT'), 'sctp://[fd00::10]:443');
    assert.equal(vars.get('V6_PORT_443_SCTP_ADDR'), 'fd00::10');
    assert.equal(vars.get('V6_SERVICE_HOST'), 'fd00::10');
  });

  it('makes nothing for headless or IP-less services', () => {
    assert.deepEqual(serviceVariables(svc('ns', 'h', 'None')), []);
    assert.deepEqual(serviceVariables(svc('ns', 'e', '')), []);
    assert.equal(hasClusterIP({ metadata: { name: 'x' } }), false);
  });

  it('names variables upper case with _ for -', () => {
    assert.equal(serviceEnvName('a-b-c'), 'A_B_C');
  });
});

describe('servicesForPod / serviceEnv', () => {
  const all = [
    svc('default', 'kubernetes', '10.96.0.1', [{ port: 443, name: 'https' }]),
    svc('default', 'other', '10.96.0.9'),
    svc('shop', 'web', '10.96.1.1'),
    svc('shop', 'headless', 'None'),
    svc('elsewhere', 'web2', '10.96.2.2'),
  ];
  const names = (ss: Service[]): string[] =>
    ss.map((s) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`);

  it('gives the pod namespace services plus the kubernetes service', () => {
    assert.deepEqual(names(servicesForPod('shop', true, all)), ['default/kubernetes', 'shop/web']);
    const env = serviceEnv(pod('shop'), all);
    assert.equal(env.get('KUBERNETES_SERVICE_HOST'), '10.96.0.1');
    assert.equal(env.get('KUBERNETES_SERVICE_PORT_HTTPS'), '443');
    assert.equal(env.get('WEB_SERVICE_HOST'), '10.96.1.1');
    assert.equal(env.has('OTHER_SERVICE_HOST'), false);
    assert.equal(env.has('WEB2_SERVICE_HOST'), false);
    assert.equal(env.has('HEADLESS_SERVICE_HOST'), false);
  });

  it('keeps only the kubernetes service when service links are off', () => {
    const env = serviceEnv(pod('shop', false), all);
    assert.deepEqual(
      [...env.keys()].filter((k) => k.endsWith('_SERVICE_HOST')),
      ['KUBERNETES_SERVICE_HOST'],
    );
    assert.deepEqual(names(servicesForPod('default', false, all)), ['default/kubernetes']);
  });

  it('gives pods of default all default services', () => {
    assert.deepEqual(names(servicesForPod('default', true, all)), [
      'default/kubernetes',
      'default/other',
    ]);
  });

  it("lets the pod's own kubernetes service win, in either list order", () => {
    const mine = svc('shop', 'kubernetes', '10.96.1.99');
    for (const list of [
      [...all, mine],
      [mine, ...all],
    ]) {
      assert.equal(serviceEnv(pod('shop'), list).get('KUBERNETES_SERVICE_HOST'), '10.96.1.99');
    }
    // With links off the pod's own services are not used at all.
    assert.equal(
      serviceEnv(pod('shop', false), [mine, ...all]).get('KUBERNETES_SERVICE_HOST'),
      '10.96.0.1',
    );
  });
});
