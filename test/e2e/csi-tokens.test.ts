/**
 * CSIDriver spec.tokenRequests and requiresRepublish on berth, against upstream's CSI mock
 * driver (test/harness/csi.ts): berth requests a service-account token bound to the pod for
 * the driver's audience and hands it to NodePublishVolume in the volume context
 * (csi.storage.k8s.io/serviceAccount.tokens, upstream's JSON), and publishes again on
 * later syncs of the pod. The token is checked by its claims, as a driver would see it.
 * A claim provisioned by csi-provisioner (the mock cannot publish inline volumes: it
 * dereferences a nil volume), with attach not required.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { startCsi, type Csi, type CsiCall } from '../harness/csi.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  getJson,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

const NODE = 'csi-tokens';
const NS = 'default';
const AUDIENCE = 'berth-csi-test';
const TOKENS_KEY = 'csi.storage.k8s.io/serviceAccount.tokens';

interface Claims {
  readonly aud?: string[];
  readonly sub?: string;
  readonly exp?: number;
  readonly iat?: number;
  readonly 'kubernetes.io'?: { readonly pod?: { readonly name?: string; readonly uid?: string } };
}

function jwtClaims(token: string): Claims {
  const payload = token.split('.')[1];
  assert.ok(payload !== undefined, 'the token is a JWT');
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Claims;
}

const context = (c: CsiCall): Record<string, string> =>
  (c.request['volume_context'] as Record<string, string> | undefined) ?? {};

describe('CSIDriver tokenRequests and requiresRepublish on berth', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let csi: Csi;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    // A short sync period: requiresRepublish publishes again on each sync of the pod.
    berth = await startBerth(cluster, { nodeName: NODE, extraConfig: ['syncFrequency: 10s'] });
    csi = await startCsi(cluster, {
      nodeName: NODE,
      rootDir: berth.dir,
      attachRequired: false,
      tokenRequests: [{ audience: AUDIENCE, expirationSeconds: 1200 }],
      requiresRepublish: true,
    });
    await eventually(
      `CSINode ${NODE} listing the driver`,
      async () => {
        const node = await getJson<{ spec?: { drivers?: { name?: string }[] } }>(cluster, [
          'get',
          'csinode',
          NODE,
        ]);
        return node?.spec?.drivers?.some((d) => d.name === csi.driverName) === true
          ? true
          : undefined;
      },
      60_000,
    );
  });

  after(async () => {
    await csi?.stop();
    await berth?.stop();
    await cluster?.stop();
  });

  test("NodePublishVolume gets the pod's bound token for the driver's audience, and again on later syncs", async () => {
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'csi-user', namespace: NS },
    });
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'tokens', namespace: NS },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: csi.storageClassName,
        resources: { requests: { storage: '1Gi' } },
      },
    });
    const pod = busyboxPod(cluster, 'token-user', NODE, {
      extraSpec: {
        serviceAccountName: 'csi-user',
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'tokens' } }],
      },
    });
    const main = pod.spec?.containers[0];
    assert.ok(main !== undefined && pod.spec !== undefined);
    await applyJson(cluster, {
      ...pod,
      spec: {
        ...pod.spec,
        containers: [{ ...main, volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      },
    });
    const running = await waitForPod(
      cluster,
      NS,
      'token-user',
      'Running',
      isRunningAndReady,
      180_000,
    ).catch(async (err: unknown) => {
      const events = (await podEvents(cluster, NS, 'token-user')).map((e) => e.message);
      throw new Error(
        `${String(err)}\nevents: ${events.join('\n')}\n${await berth.process.tail(30)}`,
      );
    });
    const uid = running.metadata?.uid ?? '';

    const published = (c: CsiCall): boolean =>
      c.method === 'NodePublishVolume' && c.error === '' && TOKENS_KEY in context(c);
    const first = await csi.waitForCall('NodePublishVolume with tokens', published);
    const tokens = JSON.parse(context(first)[TOKENS_KEY] ?? '') as Record<
      string,
      { token?: string; expirationTimestamp?: string }
    >;
    assert.deepEqual(Object.keys(tokens), [AUDIENCE]);
    const entry = tokens[AUDIENCE];
    const claims = jwtClaims(entry?.token ?? '');
    assert.deepEqual(claims.aud, [AUDIENCE]);
    assert.equal(claims.sub, `system:serviceaccount:${NS}:csi-user`);
    assert.equal(claims['kubernetes.io']?.pod?.name, 'token-user');
    assert.equal(claims['kubernetes.io']?.pod?.uid, uid);
    assert.equal((claims.exp ?? 0) - (claims.iat ?? 0), 1200);
    // metav1.Time's JSON: RFC 3339, whole seconds, UTC: the token's own expiry.
    assert.equal(
      entry?.expirationTimestamp,
      new Date((claims.exp ?? 0) * 1000).toISOString().replace('.000Z', 'Z'),
    );
    const target = String(first.request['target_path']);
    assert.match(target, new RegExp(`/pods/${uid}/volumes/kubernetes\\.io~csi/pvc-[^/]+/mount$`));

    // requiresRepublish: a later sync of the pod publishes the same target again.
    const publishes = await eventually(
      'a second NodePublishVolume of the target (requiresRepublish)',
      async () => {
        const seen = (await csi.calls()).filter(
          (c) => published(c) && String(c.request['target_path']) === target,
        );
        return seen.length >= 2 ? seen : undefined;
      },
      90_000,
    );
    assert.ok(publishes.length >= 2);

    await cluster.kubectl([
      '-n',
      NS,
      'delete',
      'pod',
      'token-user',
      '--wait=true',
      '--timeout=120s',
    ]);
    const unpublish = await csi.waitForCall(
      'NodeUnpublishVolume',
      (c) => c.method === 'NodeUnpublishVolume' && c.error === '',
    );
    assert.equal(String(unpublish.request['target_path']), target);
  });
});
