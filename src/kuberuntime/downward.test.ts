import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import {
  DownwardError,
  formatMap,
  goQuote,
  HostDownwardResolver,
  isQualifiedName,
  splitSubscript,
  type NodeAllocatable,
} from './downward.ts';

const pod: Pod = {
  metadata: {
    name: 'web',
    namespace: 'shop',
    uid: 'uid-1',
    labels: { app: 'web', 'example.com/tier': 'front' },
    annotations: { note: 'say "hi"\n', 'a.b/Mixed': 'x' },
  },
  spec: {
    nodeName: 'node-1',
    serviceAccountName: 'sa',
    containers: [
      {
        name: 'main',
        resources: {
          limits: { cpu: '1500m', memory: '128Mi', 'hugepages-2Mi': '4Mi' },
          requests: { cpu: '250m', memory: '64Mi', 'ephemeral-storage': '1Gi' },
        },
      },
      { name: 'nolimit', resources: { limits: { cpu: '0' } } },
    ],
    initContainers: [{ name: 'init', resources: { limits: { memory: '1G' } } }],
  },
};

function resolver(
  options: { hostIPs?: string[]; podIPs?: string[]; allocatable?: NodeAllocatable } = {},
): HostDownwardResolver {
  return new HostDownwardResolver({
    hostIPs: () => options.hostIPs ?? ['10.0.0.1', 'fd00::1'],
    podIPs: () => options.podIPs ?? ['10.244.0.5', 'fd00:244::5'],
    nodeAllocatable: () =>
      options.allocatable ?? { cpu: '3900m', memory: '7Gi', 'ephemeral-storage': '100Gi' },
  });
}

describe('HostDownwardResolver.podField', () => {
  const r = resolver();
  const envCases: [string, string][] = [
    ['metadata.name', 'web'],
    ['metadata.namespace', 'shop'],
    ['metadata.uid', 'uid-1'],
    ["metadata.labels['app']", 'web'],
    ["metadata.labels['example.com/tier']", 'front'],
    ["metadata.labels['missing']", ''],
    ["metadata.labels['constructor']", ''],
    ["metadata.annotations['toString']", ''],
    ["metadata.annotations['note']", 'say "hi"\n'],
    ["metadata.annotations['a.b/Mixed']", 'x'],
    ['spec.nodeName', 'node-1'],
    ['spec.serviceAccountName', 'sa'],
    ['status.hostIP', '10.0.0.1'],
    ['status.hostIPs', '10.0.0.1,fd00::1'],
    ['status.podIP', '10.244.0.5'],
    ['status.podIPs', '10.244.0.5,fd00:244::5'],
  ];
  for (const [field, want] of envCases) {
    it(`env ${field}`, () => {
      assert.equal(r.podField(pod, field, 'env'), want);
    });
  }

  it('gives all labels and annotations to volumes, sorted and quoted', () => {
    assert.equal(
      r.podField(pod, 'metadata.labels', 'volume'),
      'app="web"\nexample.com/tier="front"',
    );
    assert.equal(
      r.podField(pod, 'metadata.annotations', 'volume'),
      'a.b/Mixed="x"\nnote="say \\"hi\\"\\n"',
    );
    assert.equal(r.podField({ metadata: {} }, 'metadata.labels', 'volume'), '');
    assert.equal(r.podField(pod, 'metadata.name', 'volume'), 'web');
  });

  it('rejects whole maps in env and pod spec or status fields in volumes', () => {
    assert.throws(() => r.podField(pod, 'metadata.labels', 'env'), {
      code: 'BERTH_DOWNWARD_UNSUPPORTED_FIELD',
      message: 'unsupported fieldPath: metadata.labels',
    });
    assert.throws(() => r.podField(pod, 'spec.nodeName', 'volume'), DownwardError);
  });

  it('rejects unknown fields and bad subscripts with clear messages', () => {
    assert.throws(() => r.podField(pod, 'spec.restartPolicy', 'env'), {
      message: 'unsupported fieldPath: spec.restartPolicy',
    });
    assert.throws(() => r.podField(pod, "metadata.name['x']", 'env'), {
      message: 'fieldPath "metadata.name[\'x\']" does not support subscript',
    });
    assert.throws(() => r.podField(pod, "metadata.labels['bad key']", 'env'), {
      code: 'BERTH_DOWNWARD_INVALID_SUBSCRIPT',
    });
  });

  it('fails status.hostIP when the node has no address, but not status.podIP', () => {
    const none = resolver({ hostIPs: [], podIPs: [] });
    assert.throws(() => none.podField(pod, 'status.hostIP', 'env'), {
      code: 'BERTH_DOWNWARD_NO_HOST_IP',
    });
    assert.equal(none.podField(pod, 'status.podIP', 'env'), '');
    assert.equal(none.podField(pod, 'status.podIPs', 'env'), '');
  });
});

describe('HostDownwardResolver.resourceField', () => {
  const r = resolver();
  const cases: [string, string, string | undefined, string][] = [
    ['main', 'limits.cpu', undefined, '2'], // 1.5 cores rounded up
    ['main', 'limits.cpu', '1m', '1500'],
    ['main', 'limits.cpu', '1', '2'],
    ['main', 'limits.cpu', '0', '2'], // a zero divisor means 1
    ['main', 'requests.cpu', '1m', '250'],
    ['main', 'requests.cpu', undefined, '1'],
    ['main', 'limits.memory', undefined, String(128 * 2 ** 20)],
    ['main', 'limits.memory', '1Mi', '128'],
    ['main', 'limits.memory', '1M', '135'], // 134.2 MB rounded up
    ['main', 'requests.memory', '1Ki', String(64 * 1024)],
    ['main', 'requests.ephemeral-storage', '1Gi', '1'],
    ['main', 'limits.hugepages-2Mi', '1Mi', '4'],
    ['main', 'requests.hugepages-2Mi', undefined, '0'],
    // No limit (or a zero one): the node's allocatable.
    ['main', 'limits.ephemeral-storage', '1Gi', '100'],
    ['nolimit', 'limits.cpu', '1m', '3900'],
    ['nolimit', 'limits.memory', '1Gi', '7'],
    ['nolimit', 'requests.cpu', undefined, '0'],
    ['init', 'limits.memory', '1M', '1000'],
    ['init', 'limits.cpu', '1', '4'],
  ];
  for (const [container, resource, divisor, want] of cases) {
    it(`${container} ${resource} / ${divisor ?? '(none)'}`, () => {
      assert.equal(r.resourceField(pod, container, resource, divisor), want);
    });
  }

  it('reports 0 for a missing limit when allocatable lacks ephemeral-storage', () => {
    const small = resolver({ allocatable: { cpu: '2', memory: '1Gi' } });
    assert.equal(small.resourceField(pod, 'nolimit', 'limits.ephemeral-storage'), '0');
  });

  it('prefers pod-level limits (cpu, memory) over allocatable', () => {
    const withPodLimits = {
      ...pod,
      spec: { ...pod.spec, resources: { limits: { cpu: '2', memory: '0' } } },
    } as Pod;
    assert.equal(r.resourceField(withPodLimits, 'nolimit', 'limits.cpu', '1m'), '2000');
    // A zero pod limit counts as unset, as upstream.
    assert.equal(r.resourceField(withPodLimits, 'nolimit', 'limits.memory', '1Gi'), '7');
    // A container limit still wins.
    assert.equal(r.resourceField(withPodLimits, 'main', 'limits.cpu', '1m'), '1500');
  });

  it('rejects unknown resources, containers and quantities', () => {
    assert.throws(() => r.resourceField(pod, 'main', 'limits.gpu'), {
      code: 'BERTH_DOWNWARD_UNSUPPORTED_FIELD',
      message: 'unsupported container resource : limits.gpu',
    });
    assert.throws(() => r.resourceField(pod, 'main', 'cpu'), DownwardError);
    assert.throws(() => r.resourceField(pod, 'ghost', 'limits.cpu'), {
      code: 'BERTH_DOWNWARD_CONTAINER_NOT_FOUND',
      message: 'container ghost not found',
    });
    assert.throws(() => r.resourceField(pod, 'main', 'limits.cpu', 'lots'), {
      code: 'BERTH_DOWNWARD_INVALID_QUANTITY',
    });
  });
});

describe('helpers', () => {
  it('splits subscripted paths like upstream', () => {
    assert.deepEqual(splitSubscript("metadata.labels['a']"), { path: 'metadata.labels', key: 'a' });
    assert.deepEqual(splitSubscript("metadata.labels['a']']"), {
      path: 'metadata.labels',
      key: "a']",
    });
    assert.deepEqual(splitSubscript("['a']"), { path: "['a']" });
    assert.deepEqual(splitSubscript('metadata.name'), { path: 'metadata.name' });
  });

  it('checks qualified names', () => {
    for (const ok of ['a', 'a.b-c_d', 'example.com/x', 'A1']) assert.ok(isQualifiedName(ok), ok);
    for (const bad of ['', '-a', 'a-', 'a/b/c', '/a', 'Ex.com/a', 'a b', 'x'.repeat(64)]) {
      assert.ok(!isQualifiedName(bad), bad);
    }
  });

  it('quotes as Go strconv.Quote', () => {
    assert.equal(goQuote('plain'), '"plain"');
    assert.equal(goQuote('a"b\\c'), '"a\\"b\\\\c"');
    assert.equal(goQuote('\t\n\r\x07\b\f\v'), '"\\t\\n\\r\\a\\b\\f\\v"');
    assert.equal(goQuote('\x00\x1f\x7f'), '"\\x00\\x1f\\x7f"');
    assert.equal(goQuote('héllo 世界 \u{1f600}'), '"héllo 世界 \u{1f600}"');
    assert.equal(goQuote('\u00a0\u200b'), '"\\u00a0\\u200b"');
    assert.equal(goQuote('\u{e0001}'), '"\\U000e0001"');
  });

  it('formats maps sorted by key without a final newline', () => {
    assert.equal(formatMap({ b: '2', a: '1', B: '3' }), 'B="3"\na="1"\nb="2"');
    assert.equal(formatMap(undefined), '');
  });
});
