import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from './errors.ts';
import { parseKubeletConfigFile, readKubeletConfigFile, suggestField } from './kubelet-config.ts';

const HEADER = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';
const FILE = '/etc/berth/config.yaml';

function parse(body: string, header = HEADER) {
  return parseKubeletConfigFile(header + body, FILE);
}

function rejects(body: string, header = HEADER): ConfigError {
  try {
    parse(body, header);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    assert.equal(err.code, 'BERTH_CONFIG_INVALID');
    assert.ok(err.message.startsWith(`Cannot load ${FILE}: `), err.message);
    return err;
  }
  assert.fail('expected a ConfigError');
}

describe('parseKubeletConfigFile', () => {
  test('accepts the header alone', () => {
    const { file } = parse('');
    assert.equal(file.kind, 'KubeletConfiguration');
    assert.equal(file.maxPods, undefined);
  });

  test('reads values, with durations in milliseconds', () => {
    const { file } = parse(
      [
        'syncFrequency: 1m30s',
        'maxPods: 50',
        'failSwapOn: false',
        'cgroupDriver: systemd',
        'clusterDNS: [10.96.0.10]',
        'authentication:',
        '  webhook:',
        '    cacheTTL: 100ms',
        '  x509:',
        '    clientCAFile: /etc/kubernetes/pki/ca.crt',
        'evictionHard:',
        '  memory.available: 200Mi',
        'registerWithTaints:',
        '  - key: dedicated',
        '    value: infra',
        '    effect: NoSchedule',
        'logging:',
        '  flushFrequency: 0',
        '  verbosity: 2',
        '  options:',
        '    json:',
        '      infoBufferSize: "0"',
        'featureGates:',
        '  SomeGate: true',
        '',
      ].join('\n'),
    );
    assert.equal(file.syncFrequency, 90_000);
    assert.equal(file.maxPods, 50);
    assert.equal(file.failSwapOn, false);
    assert.equal(file.cgroupDriver, 'systemd');
    assert.deepEqual(file.clusterDNS, ['10.96.0.10']);
    assert.equal(file.authentication?.webhook?.cacheTTL, 100);
    assert.equal(file.authentication.x509?.clientCAFile, '/etc/kubernetes/pki/ca.crt');
    assert.deepEqual(file.evictionHard, { 'memory.available': '200Mi' });
    assert.deepEqual(file.registerWithTaints, [
      { key: 'dedicated', value: 'infra', effect: 'NoSchedule' },
    ]);
    assert.equal(file.logging?.flushFrequency, 0);
    assert.equal(file.logging.verbosity, 2);
    assert.deepEqual(file.featureGates, { SomeGate: true });
  });

  test('accepts a kubeadm-style file', () => {
    const { file } = parse(
      [
        'authentication:',
        '  anonymous:',
        '    enabled: false',
        '  webhook:',
        '    cacheTTL: 0s',
        '    enabled: true',
        'authorization:',
        '  mode: Webhook',
        '  webhook:',
        '    cacheAuthorizedTTL: 0s',
        '    cacheUnauthorizedTTL: 0s',
        'cgroupDriver: systemd',
        'containerRuntimeEndpoint: ""',
        'cpuManagerReconcilePeriod: 0s',
        'crashLoopBackOff: {}',
        'evictionPressureTransitionPeriod: 0s',
        'healthzBindAddress: 127.0.0.1',
        'logging:',
        '  flushFrequency: 0',
        '  options:',
        '    json:',
        '      infoBufferSize: "0"',
        '    text:',
        '      infoBufferSize: "0"',
        '  verbosity: 0',
        'memorySwap: {}',
        'rotateCertificates: true',
        'staticPodPath: /etc/kubernetes/manifests',
        'volumeStatsAggPeriod: 0s',
        '',
      ].join('\n'),
    );
    assert.equal(file.staticPodPath, '/etc/kubernetes/manifests');
  });

  test('reads JSON too', () => {
    const { file } = parseKubeletConfigFile(
      JSON.stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        maxPods: 7,
      }),
      FILE,
    );
    assert.equal(file.maxPods, 7);
  });

  test('treats null as not set', () => {
    const { file } = parse('maxPods: null\nfeatureGates:\n');
    assert.equal(file.maxPods, undefined);
    assert.equal(file.featureGates, undefined);
  });

  test('rejects an unknown field by name and line, suggesting the right one', () => {
    const err = rejects('maxPods: 5\nsyncFrequncy: 1m\n');
    assert.equal(
      err.message,
      `Cannot load ${FILE}: unknown field "syncFrequncy"; did you mean "syncFrequency"? (line 4, column 1)`,
    );
    assert.equal(err.issues[0]?.field, 'syncFrequncy');
    assert.equal(err.issues[0].line, 4);
  });

  test('rejects an unknown nested field with its path', () => {
    const err = rejects('authentication:\n  webhook:\n    enabeld: true\n');
    assert.match(
      err.message,
      /unknown field "authentication\.webhook\.enabeld"; did you mean "enabled"\? \(line 5,/,
    );
  });

  test('rejects fields v1.37 does not have, as upstream strict decoding does', () => {
    // Neither is a KubeletConfiguration field: upstream's housekeeping runs every 2 s
    // and its DRA manager reconciles every 60 s, both fixed.
    for (const field of ['podHousekeepingPeriod', 'draManagerReconcilePeriod']) {
      assert.match(rejects(`${field}: 30s\n`).message, new RegExp(`unknown field "${field}"`));
    }
  });

  test('rejects a field in the wrong case, as upstream strict decoding does', () => {
    const err = rejects('MaxPods: 5\n');
    assert.match(err.message, /unknown field "MaxPods"; did you mean "maxPods"\?/);
  });

  test('rejects wrong types naming the field and the value', () => {
    assert.match(
      rejects('maxPods: abc\n').message,
      /field "maxPods": expected a number, got "abc" \(line 3, column 10\)$/,
    );
    assert.match(
      rejects('maxPods: 1.5\n').message,
      /field "maxPods": expected an integer, got 1.5/,
    );
    assert.match(
      rejects('failSwapOn: "no"\n').message,
      /field "failSwapOn": expected true or false/,
    );
    assert.match(rejects('clusterDNS: 10.0.0.10\n').message, /field "clusterDNS": expected a list/);
    assert.match(rejects('authentication: true\n').message, /"authentication": expected a mapping/);
    assert.match(
      rejects('evictionHard:\n  memory.available: 5\n').message,
      /field "evictionHard\[memory.available\]": expected a string, got 5/,
    );
    assert.match(rejects('maxPods: 3000000000\n').message, /"maxPods": must be at most 2147483647/);
  });

  test('rejects a duration given as a number, as metav1.Duration does', () => {
    assert.match(
      rejects('syncFrequency: 60\n').message,
      /field "syncFrequency": expected a string, got 60/,
    );
  });

  test('rejects an invalid duration naming the field', () => {
    const err = rejects('nodeStatusUpdateFrequency: 10 seconds\n');
    assert.match(
      err.message,
      /field "nodeStatusUpdateFrequency": unknown unit " seconds" in duration "10 seconds" \(expected a Go duration/,
    );
    assert.equal(err.issues[0]?.line, 3);
    assert.match(rejects('runtimeRequestTimeout: "5"\n').message, /missing unit in duration "5"/);
  });

  test('rejects enum values naming the choices', () => {
    assert.match(
      rejects('cgroupDriver: systemdd\n').message,
      /field "cgroupDriver": expected one of "cgroupfs", "systemd", got "systemdd"/,
    );
    assert.match(
      rejects('logging:\n  format: xml\n').message,
      /field "logging.format": expected one of "text", "json", got "xml"/,
    );
  });

  test('rejects a malformed quantity', () => {
    assert.match(
      rejects('containerLogMaxSize: 10MB\n').message,
      /field "containerLogMaxSize": invalid quantity "10MB"/,
    );
  });

  test('rejects a taint with timeAdded', () => {
    assert.match(
      rejects('registerWithTaints:\n  - key: a\n    effect: NoSchedule\n    timeAdded: x\n')
        .message,
      /field "registerWithTaints\[0\].timeAdded": must not be set/,
    );
  });

  test('reports a missing required field', () => {
    assert.match(
      rejects('registerWithTaints:\n  - key: a\n').message,
      /field "registerWithTaints\[0\].effect" is required \(line 4/,
    );
  });

  test('rejects duplicate keys with the path and line', () => {
    const err = rejects(
      'maxPods: 5\nauthentication:\n  anonymous: {}\n  anonymous: {}\nmaxPods: 6\n',
    );
    assert.equal(err.issues.length, 2);
    assert.match(err.message, /duplicate field "authentication.anonymous" \(line 6, column 3\)/);
    assert.match(err.message, /duplicate field "maxPods" \(line 7, column 1\)/);
  });

  test('rejects keys that are not plain names', () => {
    assert.match(
      rejects('authentication:\n  ? [a]\n  : 1\n').message,
      /a key in "authentication" is not a plain name \(line 4/,
    );
  });

  test('lists several problems in file order', () => {
    const err = rejects('syncFrequncy: 1m\nmaxPods: x\nfoo: 1\n');
    assert.equal(err.issues.length, 3);
    assert.deepEqual(
      err.issues.map((i) => i.line),
      [3, 4, 5],
    );
    assert.match(err.message, /: 3 problems:\n {2}- unknown field "syncFrequncy"/);
  });

  test('rejects a wrong or missing apiVersion or kind, and only that', () => {
    const wrongVersion = rejects(
      'syncFrequncy: 1m\n',
      'apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n',
    );
    assert.equal(
      wrongVersion.message,
      `Cannot load ${FILE}: apiVersion "kubelet.config.k8s.io/v1alpha1" is not supported (expected kubelet.config.k8s.io/v1beta1) (line 1, column 13)`,
    );
    assert.match(
      rejects('', 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n')
        .message,
      /kind "KubeProxyConfiguration" is not supported \(expected KubeletConfiguration\)/,
    );
    assert.match(rejects('maxPods: 3\n', '').message, /missing apiVersion.*\n.*missing kind/s);
  });

  test('rejects empty files, non-mappings and YAML syntax errors', () => {
    assert.match(rejects('', '').message, /: the file is empty$/);
    assert.match(
      rejects('', '- a\n- b\n').message,
      /expected a KubeletConfiguration mapping, got a list/,
    );
    assert.match(rejects('maxPods: [1,\n').message, /invalid YAML: .*\(line \d+/);
    assert.match(
      rejects('---\nmaxPods: 1\n').message,
      /invalid YAML: Source contains multiple documents/,
    );
  });
});

describe('readKubeletConfigFile', () => {
  test('reports an unreadable file with its own code', async () => {
    await assert.rejects(
      readKubeletConfigFile('/nope.yaml', () => Promise.reject(new Error('ENOENT: no such file'))),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.code, 'BERTH_CONFIG_UNREADABLE');
        assert.equal(err.message, 'Cannot load /nope.yaml: ENOENT: no such file');
        return true;
      },
    );
  });
});

describe('suggestField', () => {
  test('finds near misses and case mismatches, not unrelated names', () => {
    const known = ['syncFrequency', 'maxPods', 'port', 'readOnlyPort'];
    assert.equal(suggestField('syncFrequncy', known), 'syncFrequency');
    assert.equal(suggestField('maxpods', known), 'maxPods');
    assert.equal(suggestField('prot', known), 'port');
    assert.equal(suggestField('completelyDifferent', known), undefined);
  });
});
