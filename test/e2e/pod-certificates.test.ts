/**
 * podCertificate projected sources on berth (PodCertificateRequest, GA and on at v1.37)
 * against the real apiserver: berth creates the PodCertificateRequest, a signer issues
 * it, and the pod reads its key, chain and credential bundle in upstream's layout; a
 * denied request is a Denied Warning on the pod and a FailedMount with upstream's text.
 *
 * The signer is the test's own small controller (a signer is what a cluster operator
 * runs, not a component berth talks to): it polls the requests, signs the stub PKCS#10
 * request's key with the cluster CA (`openssl x509 -req`), and writes the status as a
 * signer must (conditions, chain, notBefore/notAfter from the leaf, beginRefreshAt
 * between them). Refresh needs beginRefreshAt at least 10 min after notBefore (API
 * validation), so it is covered by unit tests on a fake clock, not here.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createPublicKey, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
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

const run = promisify(execFile);
const SIGNER = 'example.com/test-signer';
const DENYING_SIGNER = 'example.com/denying-signer';

interface Pcr {
  metadata: { name: string; namespace: string; ownerReferences?: { kind: string; name: string }[] };
  spec: {
    signerName: string;
    podName: string;
    nodeName: string;
    serviceAccountName: string;
    stubPKCS10Request: string;
  };
  status?: { conditions?: { type: string }[] };
}

/** RFC 3339 with whole seconds, as metav1.Time is written. */
const apiTime = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Issues or denies every pending request of our two signers until `signal` aborts. */
async function runSigner(cluster: Cluster, dir: string, signal: AbortSignal): Promise<void> {
  let serial = 1000;
  while (!signal.aborted) {
    const list = await getJson<{ items: Pcr[] }>(cluster, ['get', 'podcertificaterequests', '-A']);
    for (const pcr of list?.items ?? []) {
      if ((pcr.status?.conditions ?? []).length > 0) continue;
      const now = new Date().toISOString();
      let status: object;
      if (pcr.spec.signerName === DENYING_SIGNER) {
        status = {
          conditions: [
            {
              type: 'Denied',
              status: 'True',
              reason: 'NotAllowed',
              message: 'this signer issues nothing',
              lastTransitionTime: apiTime(Date.parse(now)),
            },
          ],
        };
      } else if (pcr.spec.signerName === SIGNER) {
        const csr = join(dir, `${pcr.metadata.name}.der`);
        const leafFile = join(dir, `${pcr.metadata.name}.pem`);
        await writeFile(csr, Buffer.from(pcr.spec.stubPKCS10Request, 'base64'));
        serial++;
        await run('openssl', [
          ...['x509', '-req', '-inform', 'DER', '-in', csr],
          ...['-CA', cluster.pki.ca.cert, '-CAkey', cluster.pki.ca.key],
          ...['-set_serial', String(serial), '-days', '1', '-subj', `/CN=${pcr.spec.podName}`],
          ...['-out', leafFile],
        ]);
        const leafPem = await readFile(leafFile, 'utf8');
        const leaf = new X509Certificate(leafPem);
        const notBefore = Date.parse(leaf.validFrom);
        const notAfter = Date.parse(leaf.validTo);
        status = {
          conditions: [
            {
              type: 'Issued',
              status: 'True',
              reason: 'Signed',
              message: 'signed by the test signer',
              lastTransitionTime: apiTime(Date.parse(now)),
            },
          ],
          certificateChain: leafPem + (await readFile(cluster.pki.ca.cert, 'utf8')),
          notBefore: apiTime(notBefore),
          beginRefreshAt: apiTime(notBefore + (notAfter - notBefore) / 2),
          notAfter: apiTime(notAfter),
        };
      } else {
        continue;
      }
      await cluster.kubectl([
        ...['-n', pcr.metadata.namespace, 'patch', 'podcertificaterequest', pcr.metadata.name],
        ...['--subresource=status', '--type=merge', '-p', JSON.stringify({ status })],
      ]);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe('podCertificate projections on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let dir: string;
  const stopSigner = new AbortController();
  let signer: Promise<void> | undefined;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster);
    dir = await mkdtemp(join(tmpdir(), 'berth-pcr-'));
    const resources = await cluster.kubectl(['api-resources', '--api-group=certificates.k8s.io']);
    assert.match(
      resources,
      /podcertificaterequests/,
      'the apiserver serves PodCertificateRequests',
    );
    signer = runSigner(cluster, dir, stopSigner.signal).catch((err: unknown) => {
      if (!stopSigner.signal.aborted) throw err;
    });
  });

  after(async () => {
    stopSigner.abort();
    await signer;
    await berth?.stop();
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  function certPod(name: string, signerName: string): Pod {
    const pod = busyboxPod(cluster, name, berth.nodeName, {
      extraSpec: {
        volumes: [
          {
            name: 'creds',
            projected: {
              sources: [
                {
                  podCertificate: {
                    signerName,
                    keyType: 'ED25519',
                    credentialBundlePath: 'credentialbundle.pem',
                    keyPath: 'key.pem',
                    certificateChainPath: 'chain.pem',
                  },
                },
              ],
            },
          },
        ],
      },
    });
    const main = pod.spec?.containers[0];
    assert.ok(main !== undefined && pod.spec !== undefined);
    return {
      ...pod,
      spec: {
        ...pod.spec,
        containers: [{ ...main, volumeMounts: [{ name: 'creds', mountPath: '/creds' }] }],
      },
    };
  }

  const readIn = (pod: string, file: string): Promise<string> =>
    cluster.kubectl(['exec', pod, '-c', 'main', '--', 'cat', `/creds/${file}`]);

  test('the issued key, chain and bundle in the pod; the request as upstream makes it', async () => {
    await applyJson(cluster, certPod('certified', SIGNER));
    await waitForPod(
      cluster,
      'default',
      'certified',
      'Running',
      (p) => p.status?.phase === 'Running',
      180_000,
    );
    const key = await readIn('certified', 'key.pem');
    const chain = await readIn('certified', 'chain.pem');
    const bundle = await readIn('certified', 'credentialbundle.pem');
    assert.match(key, /^-----BEGIN PRIVATE KEY-----\n/);
    assert.equal(bundle, key + chain);
    const certs = chain.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----\n/g);
    assert.equal(certs?.length, 2, 'leaf and CA');
    const leaf = new X509Certificate(certs?.[0] ?? '');
    // The certificate was issued to the key berth wrote into the pod.
    const pub = createPublicKey(key).export({ type: 'spki', format: 'der' });
    assert.deepEqual(leaf.publicKey.export({ type: 'spki', format: 'der' }), pub);
    assert.equal(leaf.subject, 'CN=certified');

    const list = await getJson<{ items: Pcr[] }>(cluster, ['get', 'podcertificaterequests']);
    const mine = (list?.items ?? []).filter((r) => r.spec.podName === 'certified');
    assert.equal(mine.length, 1);
    const pcr = mine[0];
    assert.ok(pcr !== undefined);
    assert.match(pcr.metadata.name, /^req-/);
    assert.equal(pcr.spec.nodeName, berth.nodeName);
    assert.equal(pcr.spec.serviceAccountName, 'default');
    assert.deepEqual(
      pcr.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`),
      ['Pod/certified'],
    );
    const mode = await cluster.kubectl([
      'exec',
      'certified',
      '-c',
      'main',
      '--',
      'stat',
      '-L',
      '-c',
      '%a',
      '/creds/key.pem',
    ]);
    assert.equal(mode.trim(), '644');
  });

  test('a denied request: Denied Warning on the pod and FailedMount with upstream text', async () => {
    await applyJson(cluster, certPod('refused', DENYING_SIGNER));
    const denied = await eventually(
      'the Denied event',
      async () =>
        (await podEvents(cluster, 'default', 'refused')).find((e) => e.reason === 'Denied'),
      180_000,
      1000,
    );
    assert.equal(denied.type, 'Warning');
    assert.match(
      denied.message,
      /^PodCertificateRequest default\/req-\S+ was denied, reason="NotAllowed", message="this signer issues nothing"$/,
    );
    await eventually(
      'FailedMount naming the denial',
      async () =>
        (await podEvents(cluster, 'default', 'refused')).find(
          (e) =>
            e.reason === 'FailedMount' &&
            e.message.includes(
              'PodCertificateRequest was permanently denied: reason="NotAllowed" message="this signer issues nothing"',
            ),
        ),
      180_000,
      1000,
    );
  });
});
