import assert from 'node:assert/strict';
import type { NetworkInterfaceInfo } from 'node:os';
import { describe, it } from 'node:test';
import { defaultRouteInterface, detectNodeIP, isValidNodeIP } from './node-ip.ts';

const ROUTES = [
  'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT',
  'eth1\t00000000\t0102000A\t0003\t0\t0\t200\t00000000\t0\t0\t0',
  'eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0',
  'eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
  'bth1\t00005810\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
].join('\n');

function iface(address: string, family: 'IPv4' | 'IPv6' = 'IPv4'): NetworkInterfaceInfo {
  return family === 'IPv4'
    ? {
        address,
        family,
        netmask: '255.255.255.0',
        mac: '00:00:00:00:00:00',
        internal: false,
        cidr: null,
      }
    : {
        address,
        family,
        netmask: 'ffff::',
        mac: '00:00:00:00:00:00',
        internal: false,
        cidr: null,
        scopeid: 0,
      };
}

const INTERFACES = {
  lo: [{ ...iface('127.0.0.1'), internal: true }],
  eth0: [iface('fe80::1', 'IPv6'), iface('192.0.2.2')],
  eth1: [iface('10.0.2.5')],
  bth1: [iface('10.88.0.1')],
};

describe('node IP without --node-ip (upstream NodeAddress setter)', () => {
  it('takes an IP hostname override as it is', async () => {
    assert.equal(
      await detectNodeIP('10.1.1.1', '10.1.1.1', { resolve: () => Promise.resolve([]) }),
      '10.1.1.1',
    );
  });

  it("prefers the node name's IPv4 address on this host, skipping loopback and foreign ones", async () => {
    const ip = await detectNodeIP('cp-1', null, {
      resolve: () => Promise.resolve(['127.0.1.1', '2001:db8::9', '203.0.113.9', '10.88.0.1']),
      routes: () => Promise.resolve(ROUTES),
      interfaces: () => INTERFACES,
    });
    assert.equal(ip, '10.88.0.1');
  });

  it("falls back to the default route's interface, lowest metric first", async () => {
    const ip = await detectNodeIP('cp-1', 'cp-1', {
      resolve: () => Promise.resolve([]),
      routes: () => Promise.resolve(ROUTES),
      interfaces: () => INTERFACES,
    });
    assert.equal(ip, '192.0.2.2');
    assert.equal(defaultRouteInterface(ROUTES), 'eth0');
  });

  it('finds nothing on a host without a default route', async () => {
    const ip = await detectNodeIP('cp-1', null, {
      resolve: () => Promise.resolve(['127.0.0.1']),
      routes: () =>
        Promise.resolve(
          ROUTES.split('\n')
            .filter((l) => !l.includes('\t00000000\t0'))
            .join('\n'),
        ),
      interfaces: () => INTERFACES,
    });
    assert.equal(ip, undefined);
  });

  it('accepts only addresses upstream accepts as node IPs', () => {
    for (const ip of ['10.0.0.1', '192.0.2.2', '2001:db8::1']) assert.ok(isValidNodeIP(ip), ip);
    for (const ip of [
      '127.0.0.1',
      '0.0.0.0',
      '169.254.1.1',
      '224.0.0.1',
      '::1',
      '::',
      'fe80::1',
      'ff02::1',
      'node',
    ])
      assert.ok(!isValidNodeIP(ip), ip);
  });
});
