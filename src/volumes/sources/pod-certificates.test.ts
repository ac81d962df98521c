/**
 * podCertificate projections on the fake apiserver: the request berth creates (upstream's
 * fields, a stub PKCS#10 request that verifies), issued credentials served and the pod
 * told, refresh from beginRefreshAt with the old credentials served meanwhile, denied
 * with its event and error, a vanished request abandoned and made again, and the
 * projected files' layout.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';
import type { Pod, Volume } from 'kubernetes-types/core/v1.js';
import { MemoryEventRecorder } from '../../events/types.ts';
import { FakeKubeClient } from '../../kube/fake-client.ts';
import { inNamespace, SERVICEACCOUNTS } from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';
import {
  PODCERTIFICATEREQUESTS,
  PodCertificateManager,
  type PodCertificateRequest,
} from './pod-certificates.ts';
import { resolveProjectedVolume } from './projected.ts';
import { pemCertificate } from './trust-bundles.ts';
import { fakeDownward, MapObjectReader } from './testing.ts';
import { TokenManager } from './token-manager.ts';

const NS = 'ns';
const PCRS = inNamespace(PODCERTIFICATEREQUESTS, NS);

const volume: Volume = {
  name: 'certs',
  projected: {
    sources: [
      {
        podCertificate: {
          signerName: 'example.com/signer',
          keyType: 'ECDSAP256',
          maxExpirationSeconds: 3600,
          credentialBundlePath: 'bundle.pem',
          keyPath: 'key.pem',
          certificateChainPath: 'chain.pem',
          userAnnotations: { team: 'a' },
        },
      } as never,
    ],
  },
};

const pod: Pod = {
  metadata: { name: 'web', namespace: NS, uid: 'pod-uid' },
  spec: { serviceAccountName: 'runner', containers: [], volumes: [volume] },
};

const running: AbortController[] = [];
afterEach(() => {
  for (const c of running.splice(0)) c.abort();
});

async function setup() {
  const clock = new FakeClock(Date.parse('2026-12-07T00:00:00Z'));
  const kube = new FakeKubeClient({ clock });
  await kube.create(inNamespace(SERVICEACCOUNTS, NS), { metadata: { name: 'runner' } });
  const recorder = new MemoryEventRecorder();
  const changed: string[] = [];
  const pods = [pod];
  const manager = new PodCertificateManager({
    kube,
    nodeName: 'node-a',
    nodeUID: () => 'node-uid',
    pods: () => pods,
    recorder,
    clock,
    logger: new MemoryLogger(),
    random: () => 0,
  });
  manager.onChange((uid) => changed.push(uid));
  const stop = new AbortController();
  running.push(stop);
  const done = manager.run(stop.signal);
  return { clock, kube, recorder, changed, manager, pods, stop, done };
}

/** Waits (in real time: keys are generated on the thread pool) while fake time moves slowly. */
async function until(what: string, check: () => boolean, clock: FakeClock): Promise<void> {
  for (let i = 0; i < 5000 && !check(); i++) {
    await new Promise((r) => setTimeout(r, 2));
    await clock.advance(200);
  }
  assert.ok(check(), what);
}

const creates = (kube: FakeKubeClient): number =>
  kube.calls.filter((c) => c.verb === 'create' && c.resource === 'podcertificaterequests').length;

const requests = async (kube: FakeKubeClient): Promise<PodCertificateRequest[]> =>
  (await kube.list<PodCertificateRequest>(PCRS)).items;

/** Issues `pcr` as a signer would: a chain with two certificates and the times. */
async function issue(
  kube: FakeKubeClient,
  pcr: PodCertificateRequest,
  clock: FakeClock,
  chain: string,
) {
  const now = clock.now();
  await kube.update(
    PCRS,
    pcr.metadata?.name ?? '',
    {
      ...pcr,
      status: {
        conditions: [{ type: 'Issued', status: 'True', reason: 'Reason', message: 'm' }],
        certificateChain: chain,
        notBefore: new Date(now).toISOString(),
        beginRefreshAt: new Date(now + 30 * 60_000).toISOString(),
        notAfter: new Date(now + 60 * 60_000).toISOString(),
      },
    },
    { subresource: 'status' },
  );
}

function bundleOf(manager: PodCertificateManager) {
  return manager.credentialBundle(pod, 'certs', 0);
}

describe('PodCertificateManager', () => {
  test('creates the request as upstream, serves the issued credentials, tells the pod', async () => {
    const { clock, kube, changed, manager } = await setup();
    assert.throws(
      () => bundleOf(manager),
      /^VolumeError: no credentials yet for key=|no credentials yet/,
    );
    await until('a request', () => creates(kube) === 1, clock);
    const [pcr] = await requests(kube);
    assert.ok(pcr !== undefined);
    assert.equal(pcr.metadata?.generateName, 'req-');
    assert.deepEqual(pcr.metadata?.ownerReferences, [
      { apiVersion: 'v1', kind: 'Pod', name: 'web', uid: 'pod-uid' },
    ]);
    const spec = pcr.spec ?? {};
    const sa = await kube.get<{ metadata: { uid: string } }>(
      inNamespace(SERVICEACCOUNTS, NS),
      'runner',
    );
    assert.deepEqual(
      { ...spec, stubPKCS10Request: undefined },
      {
        signerName: 'example.com/signer',
        podName: 'web',
        podUID: 'pod-uid',
        serviceAccountName: 'runner',
        serviceAccountUID: sa.metadata.uid,
        nodeName: 'node-a',
        nodeUID: 'node-uid',
        maxExpirationSeconds: 3600,
        stubPKCS10Request: undefined,
        unverifiedUserAnnotations: { team: 'a' },
      },
    );
    // The stub request is a PKCS#10 request signed by the projected key.
    const dir = mkdtempSync(join(tmpdir(), 'berth-pcr-'));
    try {
      writeFileSync(join(dir, 'req.der'), Buffer.from(String(spec['stubPKCS10Request']), 'base64'));
      execFileSync(
        'openssl',
        ['req', '-inform', 'DER', '-in', join(dir, 'req.der'), '-verify', '-noout'],
        { stdio: 'pipe' },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await until(
      'waiting state',
      () => {
        try {
          bundleOf(manager);
          return false;
        } catch (err) {
          return (
            err instanceof VolumeError && err.message === 'credential bundle is not issued yet'
          );
        }
      },
      clock,
    );
    const leaf = pemCertificate(Buffer.from('leaf'));
    const ca = pemCertificate(Buffer.from('intermediate'));
    // Headers and other text around the blocks are dropped (cleanCertificateChain).
    await issue(kube, pcr, clock, `junk\n${leaf}${ca}`);
    await until('issued', () => changed.includes('pod-uid'), clock);
    const { key, chain } = bundleOf(manager);
    assert.match(key.toString(), /^-----BEGIN PRIVATE KEY-----\n/);
    assert.equal(chain.toString(), leaf + ca);

    const files = await resolveProjectedVolume(
      pod,
      volume,
      volume.projected ?? {},
      {
        objects: new MapObjectReader(),
        tokens: new TokenManager({ kube, clock, logger: new MemoryLogger() }),
        downward: fakeDownward,
        podCertificates: manager,
      },
      new AbortController().signal,
    );
    assert.deepEqual([...files.payload.keys()].sort(), ['bundle.pem', 'chain.pem', 'key.pem']);
    assert.equal(files.payload.get('bundle.pem')?.data.toString(), key.toString() + leaf + ca);
    assert.equal(files.payload.get('key.pem')?.mode, 0o644);
  });

  test('refreshes from beginRefreshAt, serving the old credentials until the new ones', async () => {
    const { clock, kube, changed, manager } = await setup();
    assert.throws(() => bundleOf(manager));
    await until('a request', () => creates(kube) === 1, clock);
    const [first] = await requests(kube);
    assert.ok(first !== undefined);
    await issue(kube, first, clock, pemCertificate(Buffer.from('one')));
    await until('issued', () => changed.length === 1, clock);
    const old = bundleOf(manager);
    await clock.advance(30 * 60_000);
    await until('a refresh request', () => creates(kube) === 2, clock);
    assert.deepEqual(bundleOf(manager), old, 'the old credentials meanwhile');
    const second = (await requests(kube)).find((r) => r.metadata?.name !== first.metadata?.name);
    assert.ok(second !== undefined);
    await issue(kube, second, clock, pemCertificate(Buffer.from('two')));
    await until('renewed', () => changed.length === 2, clock);
    const renewed = bundleOf(manager);
    assert.notDeepEqual(renewed.key, old.key);
    assert.equal(renewed.chain.toString(), pemCertificate(Buffer.from('two')));
  });

  test('denied: a Warning event on the pod and a permanent error', async () => {
    const { clock, kube, recorder, manager } = await setup();
    assert.throws(() => bundleOf(manager));
    await until('a request', () => creates(kube) === 1, clock);
    const [pcr] = await requests(kube);
    assert.ok(pcr !== undefined);
    await kube.update(
      PCRS,
      pcr.metadata?.name ?? '',
      {
        ...pcr,
        status: {
          conditions: [{ type: 'Denied', status: 'True', reason: 'NoWay', message: 'not you' }],
        },
      },
      { subresource: 'status' },
    );
    await until('the event', () => recorder.events.length === 1, clock);
    assert.deepEqual(
      { reason: recorder.events[0]?.reason, type: recorder.events[0]?.type },
      { reason: 'Denied', type: 'Warning' },
    );
    assert.equal(
      recorder.events[0]?.message,
      `PodCertificateRequest ns/${pcr.metadata?.name ?? ''} was denied, reason="NoWay", message="not you"`,
    );
    assert.throws(
      () => bundleOf(manager),
      (e: unknown) =>
        e instanceof VolumeError &&
        e.message ===
          'PodCertificateRequest was permanently denied: reason="NoWay" message="not you"',
    );
  });

  test('a request that vanished is abandoned after 10 min and made again', async () => {
    const { clock, kube, manager } = await setup();
    assert.throws(() => bundleOf(manager));
    await until('a request', () => creates(kube) === 1, clock);
    const [pcr] = await requests(kube);
    await kube.delete(PCRS, pcr?.metadata?.name ?? '');
    await clock.advance(11 * 60_000);
    await until('a new request', () => creates(kube) === 2, clock);
  });
});
