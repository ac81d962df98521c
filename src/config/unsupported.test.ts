/**
 * Settings berth does not act on are refused unless they have the value berth behaves
 * as; the defaults (and their explicit spellings) are always accepted.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig, type LoadConfigOptions } from './load.ts';
import { applyDefaults } from './defaults.ts';
import { CGROUP_V1_MESSAGE, cgroupV1Problem, unsupportedSettings } from './unsupported.ts';
import type { KubeletConfig } from './types.ts';

const HEADER = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';

function load(argv: readonly string[], file = ''): Promise<{ kubelet: KubeletConfig }> {
  const options: LoadConfigOptions = {
    cwd: '/work',
    hostname: () => 'node-1',
    readFile: () => Promise.resolve(`${HEADER}${file}`),
  };
  return loadConfig(file === '' ? argv : ['--config=/c.yaml', ...argv], options);
}

/** The fields refused for a file body, as dotted paths. */
async function refused(file: string): Promise<string[]> {
  try {
    await load([], file);
    return [];
  } catch (err) {
    return [...String(err).matchAll(/field "([^"]+)"/g)].map((m) => m[1] ?? '');
  }
}

describe('unsupportedSettings', () => {
  test('accepts every default', () => {
    assert.deepEqual(unsupportedSettings(applyDefaults(null)), []);
  });

  test('refuses values berth would not honour, naming the field', async () => {
    const cases: [string, string][] = [
      [
        'configMapAndSecretChangeDetectionStrategy: Get\n',
        'configMapAndSecretChangeDetectionStrategy',
      ],
      [
        'configMapAndSecretChangeDetectionStrategy: Cache\n',
        'configMapAndSecretChangeDetectionStrategy',
      ],
      [
        'imagePullCredentialsVerificationPolicy: AlwaysVerify\n',
        'imagePullCredentialsVerificationPolicy',
      ],
      [
        'imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\n',
        'imagePullCredentialsVerificationPolicy',
      ],
      ['volumePluginDir: /opt/flex\n', 'volumePluginDir'],
      ['memoryReservationPolicy: TieredReservation\n', 'memoryReservationPolicy'],
      ['enableContentionProfiling: true\n', 'enableContentionProfiling'],
      [
        'logging:\n  options:\n    text:\n      splitStream: true\n',
        'logging.options.text.splitStream',
      ],
      [
        'logging:\n  options:\n    json:\n      infoBufferSize: 64Ki\n',
        'logging.options.json.infoBufferSize',
      ],
    ];
    for (const [file, field] of cases) {
      assert.deepEqual(await refused(file), [field], file);
    }
    await assert.rejects(
      load([], 'enableContentionProfiling: true\n'),
      /field "enableContentionProfiling": true is not supported by berth yet: berth has no block profiling/,
    );
  });

  test('accepts the values berth behaves as, set explicitly', async () => {
    const c = await load(
      [],
      [
        'configMapAndSecretChangeDetectionStrategy: Watch',
        'imagePullCredentialsVerificationPolicy: NeverVerifyPreloadedImages',
        'volumePluginDir: /usr/libexec/kubernetes/kubelet-plugins/volume/exec',
        'enableContentionProfiling: false',
        // Fields upstream ignores (no CPU manager reconcile with the none policy, no
        // scope without a topology policy, deprecated iptables bits, no dockershim).
        'cpuManagerReconcilePeriod: 0s',
        'topologyManagerScope: pod',
        'iptablesMasqueradeBit: 10',
        'iptablesDropBit: 11',
        'hairpinMode: none',
        'logging:',
        '  flushFrequency: 0',
        '  options:',
        '    text:',
        '      splitStream: false',
        '      infoBufferSize: "0"',
        '    json:',
        '      infoBufferSize: 0Mi',
        '',
      ].join('\n'),
    );
    assert.equal(c.kubelet.configMapAndSecretChangeDetectionStrategy, 'Watch');
    assert.deepEqual(await refused('imagePullCredentialsVerificationPolicy: NeverVerify\n'), []);
  });
});

describe('failCgroupV1', () => {
  test('refuses a cgroup v1 host only when set to true explicitly', async () => {
    const unset = (await load([])).kubelet;
    assert.equal(unset.failCgroupV1, null);
    assert.equal(cgroupV1Problem(unset, 'v1'), undefined, "upstream's default is not honoured");
    const flag = (await load(['--fail-cgroupv1'])).kubelet;
    assert.equal(cgroupV1Problem(flag, 'v1'), CGROUP_V1_MESSAGE);
    assert.equal(cgroupV1Problem(flag, 'v2'), undefined);
    const file = (await load([], 'failCgroupV1: true\n')).kubelet;
    assert.match(
      cgroupV1Problem(file, 'v1') ?? '',
      /^kubelet is configured to not run on a host using cgroup v1\./,
    );
    const off = (await load([], 'failCgroupV1: false\n')).kubelet;
    assert.equal(cgroupV1Problem(off, 'v1'), undefined);
  });
});
