import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FakeCsiNodeClient } from './fake.ts';
import { CsiDriverRegistryImpl } from './registry.ts';
import { highestSupportedVersion } from './versions.ts';

describe('highestSupportedVersion', () => {
  const cases: [string[], string | RegExp][] = [
    [['1.0.0'], '1.0.0'],
    [['v1.2.0', '1.10.0', '0.3.0'], '1.10.0'],
    [['2.0.0', '1.5'], '1.5'],
    [['1.0.0-rc1'], '1.0.0'],
    [['0.3.0'], /must be v1.x/],
    [['2.0.0'], /could not find a highest supported version/],
    [['banana'], /could not parse "banana"/],
    [['1'], /illegal version string/],
    [[], /empty array/],
  ];
  for (const [versions, want] of cases) {
    test(JSON.stringify(versions), () => {
      if (typeof want === 'string') assert.equal(highestSupportedVersion(versions).join('.'), want);
      else assert.throws(() => highestSupportedVersion(versions), want);
    });
  }
});

describe('CsiDriverRegistryImpl', () => {
  const make = (): { registry: CsiDriverRegistryImpl; made: FakeCsiNodeClient[] } => {
    const made: FakeCsiNodeClient[] = [];
    const registry = new CsiDriverRegistryImpl((name) => {
      const c = new FakeCsiNodeClient(name);
      made.push(c);
      return c;
    });
    return { registry, made };
  };

  test('registers, looks up, lists sorted, and deregisters by name and endpoint', () => {
    const { registry, made } = make();
    registry.register('b.csi', '/p/b.sock', ['1.0.0']);
    registry.register('a.csi', 'unix:///p/a.sock', ['1.0.0']);
    assert.deepEqual(registry.drivers(), ['a.csi', 'b.csi']);
    assert.equal(registry.client('a.csi'), made[1]);
    assert.equal(registry.client('c.csi'), undefined);
    assert.equal(registry.deregister('a.csi', '/p/other.sock'), false);
    assert.equal(registry.deregister('a.csi', 'unix:///p/a.sock'), true);
    assert.equal(made[1]?.closed, true);
    assert.deepEqual(registry.drivers(), ['b.csi']);
  });

  test('the same endpoint registering again replaces the entry and closes the old client', () => {
    const { registry, made } = make();
    registry.register('a.csi', '/p/a.sock', ['1.0.0']);
    registry.register('a.csi', '/p/a.sock', ['1.0.0']);
    assert.equal(registry.client('a.csi'), made[1]);
    assert.equal(made[0]?.closed, true);
  });

  test('another endpoint must offer a higher version (upstream validateVersions)', () => {
    const { registry } = make();
    registry.register('a.csi', '/p/a.sock', ['1.2.0']);
    assert.throws(() => {
      registry.register('a.csi', '/p/a2.sock', ['1.2.0']);
    }, /RegisterPlugin for CSI driver "a.csi" failed. Another driver with the same name is already registered with a higher supported version: "1.2.0"/);
    registry.register('a.csi', '/p/a2.sock', ['1.3.0']);
    assert.equal(registry.endpoint('a.csi'), '/p/a2.sock');
  });

  test('refuses no 1.x version, an empty list, an empty name and a relative endpoint', () => {
    const { registry } = make();
    assert.throws(() => {
      registry.validate('a.csi', '/p/a.sock', ['0.3.0', '2.0.0']);
    }, /kubernetes.io\/csi: ValidatePlugin for CSI driver "a.csi" failed. None of the versions specified \["0.3.0" "2.0.0"\] are supported/);
    assert.throws(() => {
      registry.validate('a.csi', '/p/a.sock', []);
    }, /Plugin returned an empty list for supported versions/);
    assert.throws(() => {
      registry.validate('', '/p/a.sock', ['1.0.0']);
    }, /driver name is empty/);
    assert.throws(() => {
      registry.validate('a.csi', 'p/a.sock', ['1.0.0']);
    }, /not an absolute path/);
    assert.deepEqual(registry.drivers(), []);
  });
});
