import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { parseGoQuantity } from './go-quantity.ts';
import { decodeStaticPod, decodeStaticPods, ManifestError } from './static-pod.ts';

const testdata = new URL('./testdata/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, testdata), 'utf8');

/**
 * What upstream's kubelet (k8s.io/kubernetes v1.37.2, pkg/kubelet/config) made of the
 * manifests in testdata/: read from /tmp/berth-fixtures/manifests on node "node-a" by
 * its file source, and web.yaml served at http://127.0.0.1:18431/pod by its URL source
 * (hack/go/k8s/static-pod-hash, modes `file` and `url`); config.seen dropped.
 */
const upstream = JSON.parse(read('upstream-pods.json')) as Pod[];
const DIR = '/tmp/berth-fixtures/manifests';

function upstreamPod(name: string, source: string): Pod {
  const pod = upstream.find(
    (p) =>
      p.metadata?.name === name &&
      p.metadata.annotations?.['kubernetes.io/config.source'] === source,
  );
  assert.ok(pod, `no upstream pod ${name} from ${source}`);
  return pod;
}

/**
 * The pod as Go serializes it, for comparison: quantities in their canonical strings
 * (left out here) and empty lists omitted (omitempty).
 */
function canonicalQuantities(pod: Pod): Pod {
  return JSON.parse(
    JSON.stringify(pod, (k, v: unknown) =>
      (k === 'cpu' || k === 'memory' || k === 'sizeLimit') && typeof v !== 'object'
        ? '<q>'
        : Array.isArray(v) && v.length === 0
          ? undefined
          : v,
    ),
  ) as Pod;
}

describe('static pod identity (upstream common.go applyDefaults)', () => {
  for (const [file, name] of [
    ['web.yaml', 'web-node-a'],
    ['kube-apiserver.yaml', 'kube-apiserver-node-a'],
    ['etcd.json', 'etcd-node-a'],
    ['weird.yaml', 'weird-node-a'],
  ] as const) {
    it(`${file}: the UID, name, namespace and hash upstream derives`, () => {
      const want = upstreamPod(name, 'file');
      const { pod } = decodeStaticPod(read(file), {
        nodeName: 'node-a',
        source: `${DIR}/${file}`,
        kind: 'file',
      });
      assert.equal(pod.metadata?.uid, want.metadata?.uid);
      assert.equal(pod.metadata?.name, want.metadata?.name);
      assert.equal(pod.metadata?.namespace, want.metadata?.namespace);
      assert.equal(
        pod.metadata?.annotations?.['kubernetes.io/config.hash'],
        want.metadata?.annotations?.['kubernetes.io/config.hash'],
      );
      // The defaulted spec is upstream's (quantities aside: the API rewrites their strings).
      assert.deepEqual(canonicalQuantities(pod).spec, canonicalQuantities(want).spec);
      assert.deepEqual(pod.status, want.status);
    });
  }

  it('a manifest using most of the pod spec (kitchen-sink.yaml)', () => {
    const want = upstreamPod('sink-node-a', 'file');
    const { pod } = decodeStaticPod(read('kitchen-sink.yaml'), {
      nodeName: 'node-a',
      // Read by upstream from this path (see the note on `upstream` above).
      source: '/tmp/berth-fixtures/sink/sink.yaml',
      kind: 'file',
    });
    assert.equal(pod.metadata?.uid, want.metadata?.uid);
    assert.deepEqual(canonicalQuantities(pod).spec, canonicalQuantities(want).spec);
  });

  it('the URL source hashes the URL and adds no toleration', () => {
    const want = upstreamPod('web-node-a', 'http');
    const [decoded] = decodeStaticPods(read('web.yaml'), {
      nodeName: 'node-a',
      source: 'http://127.0.0.1:18431/pod',
      kind: 'http',
    });
    assert.equal(decoded?.pod.metadata?.uid, want.metadata?.uid);
    assert.deepEqual(decoded?.pod.spec, want.spec);
  });

  it('the same pod in another file, or on another node, is another pod', () => {
    const a = decodeStaticPod(read('web.yaml'), {
      nodeName: 'node-a',
      source: '/a.yaml',
      kind: 'file',
    });
    const b = decodeStaticPod(read('web.yaml'), {
      nodeName: 'node-a',
      source: '/b.yaml',
      kind: 'file',
    });
    const c = decodeStaticPod(read('web.yaml'), {
      nodeName: 'node-b',
      source: '/a.yaml',
      kind: 'file',
    });
    assert.notEqual(a.pod.metadata?.uid, b.pod.metadata?.uid);
    assert.notEqual(a.pod.metadata?.uid, c.pod.metadata?.uid);
    assert.equal(c.pod.metadata?.name, 'web-node-b');
  });

  it('the same pod written as JSON or YAML, in any key order, has one UID', () => {
    const o = { nodeName: 'node-a', source: `${DIR}/web.yaml`, kind: 'file' } as const;
    const yaml = decodeStaticPod(read('web.yaml'), o).pod.metadata?.uid;
    const json = decodeStaticPod(
      JSON.stringify({
        spec: { containers: [{ command: ['sleep', '3600'], image: 'busybox:1.36', name: 'c' }] },
        metadata: { labels: { app: 'web' }, name: 'web' },
        kind: 'Pod',
        apiVersion: 'v1',
      }),
      o,
    ).pod.metadata?.uid;
    assert.equal(json, yaml);
  });
});

describe('bad manifests', () => {
  const o = { nodeName: 'node-a', source: '/m/x.yaml', kind: 'file' } as const;
  const cases: [string, string, RegExp][] = [
    ['invalid YAML', 'apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n', /error converting YAML/],
    ['no kind', 'apiVersion: v1\nmetadata: {name: x}\n', /Object 'Kind' is missing/],
    [
      'unknown kind',
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n',
      /no kind "Deployment" is registered for version "apps\/v1"/,
    ],
    [
      'no name',
      'apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c, image: i}]}\n',
      /name is needed/,
    ],
    [
      'no containers',
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n',
      /spec.containers: Required value/,
    ],
    [
      'a secret',
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i}], volumes: [{name: s, secret: {secretName: s}}]}\n',
      /static pods may not reference secrets/,
    ],
  ];
  cases.push(
    [
      'a bool where a string goes (YAML 1.1: yes, y, on are booleans, as in upstream)',
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i, command: [yes]}]}\n',
      /json: cannot unmarshal bool into Go struct field spec\.containers\[0\]\.command\[0\] of type string/,
    ],
    [
      'a number label',
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {a: 1}}\nspec: {containers: [{name: c, image: i}]}\n',
      /cannot unmarshal number 1 into Go struct field metadata\.labels\[a\] of type string/,
    ],
    [
      'a fraction where an integer goes',
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {terminationGracePeriodSeconds: 1.5, containers: [{name: c, image: i}]}\n',
      /cannot unmarshal number 1.5 into Go struct field spec\.terminationGracePeriodSeconds of type int64/,
    ],
  );
  for (const [what, data, message] of cases) {
    it(what, () => {
      assert.throws(
        () => decodeStaticPod(data, o),
        (err: unknown) => {
          assert.ok(err instanceof ManifestError);
          assert.match(err.message, message);
          return true;
        },
      );
    });
  }

  it('only the first YAML document counts, as upstream; the rest is reported', () => {
    const { pod, warnings } = decodeStaticPod(
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i}]}\n---\napiVersion: v1\nkind: Pod\n',
      o,
    );
    assert.equal(pod.metadata?.name, 'x-node-a');
    assert.deepEqual(warnings, ['only the first YAML document is read: 1 more ignored']);
  });

  it('unknown fields are reported, and ignored as upstream does', () => {
    const { pod, warnings } = decodeStaticPod(
      'apiVersion: v1\nkind: Pod\nmetadata: {name: x, bogus: 1}\nspec: {containers: [{name: c, image: i, colour: red}]}\n',
      o,
    );
    assert.deepEqual(warnings, [
      'unknown field "metadata.bogus"',
      'unknown field "spec.containers[0].colour"',
    ]);
    assert.equal(pod.metadata?.name, 'x-node-a');
  });
});

describe('Go quantities (apimachinery ParseQuantity), as printed by upstream', () => {
  // From `static-pod-hash q`: value, scale, cached string, format, and the inf.Dec path.
  const table: [string | number, string][] = [
    ['250m', '250,-3,250m,DecimalSI'],
    ['1', '1,0,1,DecimalSI'],
    [1, '1,0,1,DecimalSI'],
    ['1.5', '15,-1,,DecimalSI'],
    ['1000', '1000,0,,DecimalSI'],
    ['1k', '1,3,1k,DecimalSI'],
    ['1Ki', '1024,0,1Ki,BinarySI'],
    ['128Mi', '134217728,0,,BinarySI'],
    ['100M', '100,6,100M,DecimalSI'],
    ['1e3', '1,3,1e3,DecimalExponent'],
    ['0', '0,0,0,DecimalSI'],
    ['2.50', '250,-2,,DecimalSI'],
    ['0.0001', '1,-4,,DecimalSI'],
    ['-1', '-1,0,-1,DecimalSI'],
    ['100Gi', '107374182400,0,100Gi,BinarySI'],
    ['500Mi', '524288000,0,500Mi,BinarySI'],
    ['010', '10,0,010,DecimalSI'],
    ['10.00m', '1000,-5,,DecimalSI'],
    ['1.5Gi', 'dec:1610612736000000000,9,,BinarySI'],
    ['1.25Ki', 'dec:1280000000000,9,,BinarySI'],
    ['12345678901234567890', 'dec:5097733592002180096 669260594,9,,DecimalSI'],
    ['8Ei', 'dec:9223372036854775807,0,,BinarySI'],
  ];
  for (const [input, want] of table) {
    it(String(input), () => {
      const q = parseGoQuantity(input);
      const d = q.d.Dec;
      const got =
        d === null
          ? `${q.i.value},${q.i.scale},${q.s},${q.Format}`
          : `dec:${d.unscaled.abs.join(' ')},${d.scale},${q.s},${q.Format}`;
      assert.equal(got, want);
    });
  }
});
