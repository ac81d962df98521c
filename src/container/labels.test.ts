/**
 * CRI labels and annotations: the exact keys and value formats upstream writes, the
 * round trip through the parsers, tolerance of missing and garbled values, log paths.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import {
  containerAnnotations,
  containerLabels,
  containerLogPath,
  containerLogSymlink,
  parseContainerAnnotations,
  parseContainerLabels,
  parseSandboxLabels,
  podLogsDirectory,
  sandboxAnnotations,
  sandboxLabels,
} from './labels.ts';

const pod: Pod = {
  metadata: {
    name: 'web',
    namespace: 'shop',
    uid: '6f1c-uid',
    labels: { app: 'web', 'io.kubernetes.pod.name': 'spoofed' },
    annotations: { 'example.com/owner': 'team-a' },
  },
  spec: { terminationGracePeriodSeconds: 45, containers: [{ name: 'main', image: 'busybox:1' }] },
};

const container: Container = {
  name: 'main',
  image: 'busybox:1',
  terminationMessagePath: '/tmp/term',
  terminationMessagePolicy: 'FallbackToLogsOnError',
  lifecycle: { preStop: { exec: { command: ['/bin/sh', '-c', 'sleep 5'] } } },
  ports: [
    { name: 'http', containerPort: 8080, protocol: 'TCP' },
    { containerPort: 53, protocol: 'UDP', hostPort: 5353 },
  ],
};

describe('sandbox labels and annotations', () => {
  test('the pod labels plus the identity labels, which win a clash', () => {
    assert.deepEqual(sandboxLabels(pod), {
      app: 'web',
      'io.kubernetes.pod.name': 'web',
      'io.kubernetes.pod.namespace': 'shop',
      'io.kubernetes.pod.uid': '6f1c-uid',
    });
  });

  test('annotations are the pod annotations', () => {
    assert.deepEqual(sandboxAnnotations(pod), { 'example.com/owner': 'team-a' });
    assert.deepEqual(sandboxAnnotations({}), {});
  });

  test('round trip', () => {
    assert.deepEqual(parseSandboxLabels(sandboxLabels(pod)), {
      podName: 'web',
      podNamespace: 'shop',
      podUid: '6f1c-uid',
      labels: { app: 'web' },
    });
  });

  test('missing labels read as empty', () => {
    assert.deepEqual(parseSandboxLabels({ other: 'x' }), {
      podName: '',
      podNamespace: '',
      podUid: '',
      labels: { other: 'x' },
    });
  });
});

describe('container labels', () => {
  test('exactly the four identity labels', () => {
    assert.deepEqual(containerLabels(pod, container), {
      'io.kubernetes.pod.name': 'web',
      'io.kubernetes.pod.namespace': 'shop',
      'io.kubernetes.pod.uid': '6f1c-uid',
      'io.kubernetes.container.name': 'main',
    });
  });

  test('round trip and missing labels', () => {
    assert.deepEqual(parseContainerLabels(containerLabels(pod, container)), {
      podName: 'web',
      podNamespace: 'shop',
      podUid: '6f1c-uid',
      containerName: 'main',
    });
    assert.deepEqual(parseContainerLabels({}), {
      podName: '',
      podNamespace: '',
      podUid: '',
      containerName: '',
    });
  });
});

describe('container annotations', () => {
  test('keys and value formats as upstream writes them', () => {
    const deleting: Pod = { ...pod, metadata: { ...pod.metadata, deletionGracePeriodSeconds: 10 } };
    assert.deepEqual(containerAnnotations(deleting, container, { restartCount: 3 }), {
      'io.kubernetes.container.hash': '8f2cabc',
      'io.kubernetes.container.restartCount': '3',
      'io.kubernetes.container.terminationMessagePath': '/tmp/term',
      'io.kubernetes.container.terminationMessagePolicy': 'FallbackToLogsOnError',
      'io.kubernetes.pod.deletionGracePeriod': '10',
      'io.kubernetes.pod.terminationGracePeriod': '45',
      'io.kubernetes.container.preStopHandler': '{"exec":{"command":["/bin/sh","-c","sleep 5"]}}',
      'io.kubernetes.container.ports':
        '[{"name":"http","containerPort":8080,"protocol":"TCP"},{"containerPort":53,"protocol":"UDP","hostPort":5353}]',
    });
  });

  test('optional annotations are left out; termination defaults filled in', () => {
    const bare = containerAnnotations(
      { spec: { containers: [] } },
      { name: 'c', image: 'i' },
      {
        restartCount: 0,
      },
    );
    assert.deepEqual(Object.keys(bare).sort(), [
      'io.kubernetes.container.hash',
      'io.kubernetes.container.restartCount',
      'io.kubernetes.container.terminationMessagePath',
      'io.kubernetes.container.terminationMessagePolicy',
    ]);
    assert.equal(bare['io.kubernetes.container.terminationMessagePath'], '/dev/termination-log');
    assert.equal(bare['io.kubernetes.container.terminationMessagePolicy'], 'File');
    const noPorts = containerAnnotations(pod, { ...container, ports: [] }, { restartCount: 0 });
    assert.equal(noPorts['io.kubernetes.container.ports'], undefined);
  });

  test('berth keys override extra annotations', () => {
    const annotations = containerAnnotations(pod, container, {
      restartCount: 1,
      extra: { 'io.kubernetes.container.restartCount': '99', 'device.example/gpu': '0' },
    });
    assert.equal(annotations['io.kubernetes.container.restartCount'], '1');
    assert.equal(annotations['device.example/gpu'], '0');
  });

  test('round trip', () => {
    const deleting: Pod = { ...pod, metadata: { ...pod.metadata, deletionGracePeriodSeconds: 0 } };
    const parsed = parseContainerAnnotations(
      containerAnnotations(deleting, container, { restartCount: 7 }),
    );
    assert.deepEqual(parsed, {
      hash: '8f2cabc',
      hasRestartCount: true,
      restartCount: 7,
      terminationMessagePath: '/tmp/term',
      terminationMessagePolicy: 'FallbackToLogsOnError',
      podTerminationGracePeriodSeconds: 45,
      podDeletionGracePeriodSeconds: 0,
      preStopHandler: container.lifecycle?.preStop,
      ports: container.ports,
    });
  });

  test('missing values read as defaults', () => {
    assert.deepEqual(parseContainerAnnotations({}), {
      hash: undefined,
      hasRestartCount: false,
      restartCount: 0,
      terminationMessagePath: '',
      terminationMessagePolicy: '',
      podTerminationGracePeriodSeconds: undefined,
      podDeletionGracePeriodSeconds: undefined,
      preStopHandler: undefined,
      ports: undefined,
    });
  });

  const garbled: [string, string][] = [
    ['io.kubernetes.container.hash', 'not-hex'],
    ['io.kubernetes.container.restartCount', 'three'],
    ['io.kubernetes.container.restartCount', '-1'],
    ['io.kubernetes.container.restartCount', '1.5'],
    ['io.kubernetes.pod.terminationGracePeriod', '30s'],
    ['io.kubernetes.pod.deletionGracePeriod', ''],
    ['io.kubernetes.container.preStopHandler', '{"exec":'],
    ['io.kubernetes.container.preStopHandler', '["not","an","object"]'],
    ['io.kubernetes.container.preStopHandler', 'null'],
    ['io.kubernetes.container.ports', '{"containerPort":80}'],
    ['io.kubernetes.container.ports', '[{"containerPort":"80"}]'],
    ['io.kubernetes.container.ports', '[null]'],
    ['io.kubernetes.container.ports', 'garbage'],
  ];
  for (const [key, value] of garbled) {
    test(`garbled ${key}=${JSON.stringify(value)} reads as absent`, () => {
      const parsed = parseContainerAnnotations({ [key]: value });
      assert.deepEqual(parsed, parseContainerAnnotations({}));
    });
  }

  test('an upper-case or zero-padded hash is normalised', () => {
    assert.equal(parseContainerAnnotations({ 'io.kubernetes.container.hash': '0ABC' }).hash, 'abc');
  });
});

describe('log paths', () => {
  test('pod log directory <dir>/<namespace>_<name>_<uid>', () => {
    const identity = { namespace: 'shop', name: 'web', uid: '6f1c-uid' };
    assert.equal(podLogsDirectory(identity), '/var/log/pods/shop_web_6f1c-uid');
    assert.equal(podLogsDirectory(identity, '/srv/logs/'), '/srv/logs/shop_web_6f1c-uid');
  });

  test('container log path <container>/<restartCount>.log, relative', () => {
    assert.equal(containerLogPath('main', 0), 'main/0.log');
    assert.equal(containerLogPath('main', 12), 'main/12.log');
  });

  test('container log symlink <pod>_<namespace>_<container>-<id>.log, cut to 255 bytes', () => {
    assert.equal(
      containerLogSymlink({ namespace: 'shop', name: 'web' }, 'main', 'abc123'),
      '/var/log/containers/web_shop_main-abc123.log',
    );
    const long = containerLogSymlink(
      { namespace: 'n'.repeat(63), name: 'p'.repeat(253) },
      'main',
      'f'.repeat(64),
      '/x',
    );
    const file = long.slice('/x/'.length);
    assert.equal(Buffer.byteLength(file), 255);
    assert.ok(file.endsWith('.log'));
  });
});
