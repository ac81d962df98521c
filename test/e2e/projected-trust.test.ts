/**
 * clusterTrustBundle projected sources on berth (ClusterTrustBundleProjection, GA and on
 * at v1.37): bundles created in the real apiserver (certificates.k8s.io, whichever
 * version it serves) are written by name and by signerName + labelSelector, an optional
 * missing one is an empty file, a changed bundle reaches the file, and a missing
 * required one is a FailedMount with upstream's text.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';
import { makeCa } from '../harness/pki.ts';

const SIGNER = 'example.com/trust';

/** The fingerprints of the certificates in a PEM text, sorted (the order is shuffled). */
function fingerprints(pem: string): string[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b).fingerprint256).sort();
}

describe('clusterTrustBundle projections on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let dir: string;
  let version: string;
  const pem: Record<'a' | 'b' | 'c', string> = { a: '', b: '', c: '' };
  const fp: Record<'a' | 'b' | 'c', string> = { a: '', b: '', c: '' };

  const bundle = (name: string, certs: readonly string[], extra: object = {}): object => ({
    apiVersion: `certificates.k8s.io/${version}`,
    kind: 'ClusterTrustBundle',
    metadata: { name, ...extra },
    spec: {
      trustBundle: certs.join(''),
      ...(name.includes(':') && { signerName: SIGNER }),
    },
  });

  const readIn = (pod: string, file: string): Promise<string> =>
    cluster.kubectl(['exec', pod, '-c', 'main', '--', 'cat', `/trust/${file}`]);

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    dir = await mkdtemp(join(tmpdir(), 'berth-ctb-'));
    for (const k of ['a', 'b', 'c'] as const) {
      const ca = await makeCa(dir, `ca-${k}`, `berth-trust-${k}`);
      pem[k] = await readFile(ca.cert, 'utf8');
      fp[k] = new X509Certificate(pem[k]).fingerprint256;
    }
    // The newest version the apiserver serves, as the kubelet chooses it.
    const served = await cluster.kubectl(['api-versions']);
    const lines = served.split('\n');
    const found = ['v1', 'v1beta1', 'v1alpha1'].find((v) =>
      lines.includes(`certificates.k8s.io/${v}`),
    );
    assert.ok(found !== undefined, `no certificates.k8s.io version served:\n${served}`);
    version = found;
    const resources = await cluster.kubectl(['api-resources', '--api-group=certificates.k8s.io']);
    assert.match(resources, /clustertrustbundles/, 'the apiserver serves ClusterTrustBundles');
    await applyJson(cluster, bundle('root-a', [pem.a]));
    await applyJson(
      cluster,
      bundle('example.com:trust:prod', [pem.b], { labels: { env: 'prod' } }),
    );
    await applyJson(
      cluster,
      bundle('example.com:trust:dev', [pem.c, pem.b], { labels: { env: 'dev' } }),
    );
  });

  after(async () => {
    await berth?.stop();
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  function trustPod(name: string, sources: readonly object[]): Pod {
    const pod = busyboxPod(cluster, name, berth.nodeName, {
      command: ['sh', '-c', 'sleep 3600'],
      extraSpec: { volumes: [{ name: 'trust', projected: { sources } }] },
    });
    const main = pod.spec?.containers[0];
    assert.ok(main !== undefined && pod.spec !== undefined);
    return {
      ...pod,
      spec: {
        ...pod.spec,
        containers: [{ ...main, volumeMounts: [{ name: 'trust', mountPath: '/trust' }] }],
      },
    };
  }

  test('by name, by signer and selector, optional missing; a change reaches the file', async () => {
    await applyJson(
      cluster,
      trustPod('trust', [
        { clusterTrustBundle: { name: 'root-a', path: 'by-name.pem' } },
        {
          clusterTrustBundle: {
            signerName: SIGNER,
            labelSelector: { matchLabels: { env: 'prod' } },
            path: 'signer/prod.pem',
          },
        },
        { clusterTrustBundle: { signerName: SIGNER, labelSelector: {}, path: 'all.pem' } },
        { clusterTrustBundle: { name: 'absent', optional: true, path: 'optional.pem' } },
      ]),
    );
    await waitForPod(
      cluster,
      'default',
      'trust',
      'Running',
      (p) => p.status?.phase === 'Running',
      120_000,
    );
    assert.deepEqual(fingerprints(await readIn('trust', 'by-name.pem')), [fp.a]);
    assert.deepEqual(fingerprints(await readIn('trust', 'signer/prod.pem')), [fp.b]);
    // Unified and de-duplicated: b is in both signer bundles, written once.
    assert.deepEqual(fingerprints(await readIn('trust', 'all.pem')), [fp.b, fp.c].sort());
    assert.equal(await readIn('trust', 'optional.pem'), '');
    const mode = await cluster.kubectl([
      'exec',
      'trust',
      '-c',
      'main',
      '--',
      'stat',
      '-L',
      '-c',
      '%a',
      '/trust/by-name.pem',
    ]);
    assert.equal(mode.trim(), '644');

    // The prod bundle gains a: the projected file follows.
    const current = await getJson<{ spec: { trustBundle: string } }>(cluster, [
      'get',
      `clustertrustbundles.${version}.certificates.k8s.io`,
      'example.com:trust:prod',
    ]);
    assert.ok(current !== undefined);
    await applyJson(cluster, {
      ...current,
      spec: { ...current.spec, trustBundle: pem.b + pem.a },
    });
    const got = await eventually(
      'the new anchor in signer/prod.pem',
      async () => {
        const now = fingerprints(await readIn('trust', 'signer/prod.pem'));
        return now.length === 2 ? now : undefined;
      },
      120_000,
      1000,
    );
    assert.deepEqual(got, [fp.a, fp.b].sort());
  });

  test('a missing required bundle is FailedMount with upstream text', async () => {
    await applyJson(
      cluster,
      trustPod('no-bundle', [{ clusterTrustBundle: { name: 'nowhere', path: 'ca.pem' } }]),
    );
    const event = await eventually(
      'FailedMount for the missing bundle',
      async () =>
        (await podEvents(cluster, 'default', 'no-bundle')).find((e) => e.reason === 'FailedMount'),
      120_000,
      1000,
    );
    assert.match(
      event.message,
      /while getting ClusterTrustBundle: clustertrustbundle\.certificates\.k8s\.io "nowhere" not found/,
    );
    await applyJson(
      cluster,
      trustPod('no-match', [{ clusterTrustBundle: { signerName: SIGNER, path: 'ca.pem' } }]),
    );
    const none = await eventually(
      'FailedMount for a signer without a selector',
      async () =>
        (await podEvents(cluster, 'default', 'no-match')).find((e) => e.reason === 'FailedMount'),
      120_000,
      1000,
    );
    // No labelSelector selects nothing, as upstream's LabelSelectorAsSelector(nil).
    assert.match(
      none.message,
      /combination of signerName and labelSelector matched zero ClusterTrustBundles/,
    );
  });
});
