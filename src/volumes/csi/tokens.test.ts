import { status as GrpcStatus } from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { CSIDriver } from 'kubernetes-types/storage/v1.js';
import { FakeCsiDriver, FakeCsiDriverRegistry, FakeCsiNodeClient } from '../../csi/fake.ts';
import type { CsiPublishRequest } from '../../csi/types.ts';
import { FakeKubeClient } from '../../kube/fake-client.ts';
import { CSIDRIVERS } from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { FakeMounter } from '../mounter.ts';
import type {
  ServiceAccountToken,
  ServiceAccountTokens,
  TokenRequestParams,
} from '../sources/token-manager.ts';
import type { DriverPolicy } from './api.ts';
import { publishPath } from './paths.ts';
import { CsiVolumePlugin } from './plugin.ts';
import type { CsiVolumeSpec } from './spec.ts';
import { SERVICE_ACCOUNT_TOKENS_KEY, serviceAccountTokenAttrs } from './tokens.ts';

const DRIVER = 'tokens.csi.berth.test';
const signal = new AbortController().signal;

/** Hands out numbered tokens and records what was asked. */
class RecordingTokens implements ServiceAccountTokens {
  readonly asked: TokenRequestParams[] = [];
  fail: Error | undefined;
  getToken(params: TokenRequestParams): Promise<ServiceAccountToken> {
    if (this.fail !== undefined) return Promise.reject(this.fail);
    this.asked.push(params);
    return Promise.resolve({
      token: `tok-${this.asked.length}-${params.audiences.join(',')}`,
      expiresAt: Date.UTC(2030, 0, 2, 3, 4, 5, 678),
    });
  }
  deletePodTokens(): void {}
}

/** Records the publish requests and, as a real driver, creates the target. */
class PublishRecorder extends FakeCsiNodeClient {
  readonly publishes: CsiPublishRequest[] = [];
  override async nodePublishVolume(req: CsiPublishRequest, s: AbortSignal): Promise<void> {
    await super.nodePublishVolume(req, s);
    this.publishes.push(req);
    await mkdir(req.targetPath, { recursive: true });
  }
}

const pod: Pod = {
  metadata: { name: 'web', namespace: 'ns', uid: 'u1' },
  spec: { serviceAccountName: 'builder', containers: [{ name: 'c' }] },
};

const policy = (p: Partial<DriverPolicy>): DriverPolicy => ({
  found: true,
  attachRequired: false,
  podInfoOnMount: false,
  lifecycleModes: ['Persistent'],
  fsGroupPolicy: 'None',
  tokenRequests: [],
  requiresRepublish: false,
  tokenInSecrets: false,
  ...p,
});

describe('serviceAccountTokenAttrs', () => {
  it("renders upstream's JSON: audiences sorted, metav1.Time in whole seconds", async () => {
    const tokens = new RecordingTokens();
    const attrs = await serviceAccountTokenAttrs(
      tokens,
      pod,
      policy({ tokenRequests: [{ audience: 'vault' }, { audience: '', expirationSeconds: 900 }] }),
      signal,
    );
    assert.deepEqual(Object.keys(attrs ?? {}), [SERVICE_ACCOUNT_TOKENS_KEY]);
    assert.equal(
      attrs?.[SERVICE_ACCOUNT_TOKENS_KEY],
      '{"":{"token":"tok-2-","expirationTimestamp":"2030-01-02T03:04:05Z"},' +
        '"vault":{"token":"tok-1-vault","expirationTimestamp":"2030-01-02T03:04:05Z"}}',
    );
    assert.deepEqual(tokens.asked, [
      {
        namespace: 'ns',
        serviceAccount: 'builder',
        audiences: ['vault'],
        expirationSeconds: 3600,
        pod: { name: 'web', uid: 'u1' },
      },
      {
        namespace: 'ns',
        serviceAccount: 'builder',
        audiences: [],
        expirationSeconds: 900,
        pod: { name: 'web', uid: 'u1' },
      },
    ]);
  });

  it('asks for nothing when the driver wants no tokens, and fails without a token source', async () => {
    assert.equal(await serviceAccountTokenAttrs(undefined, pod, policy({}), signal), undefined);
    await assert.rejects(
      serviceAccountTokenAttrs(
        undefined,
        pod,
        policy({ tokenRequests: [{ audience: 'a' }] }),
        signal,
      ),
      /ServiceAccountTokenGetter is nil/,
    );
  });
});

describe('CSI tokenRequests and requiresRepublish through the plugin', () => {
  let root = '';
  let kube: FakeKubeClient;
  let client: PublishRecorder;
  let tokens: RecordingTokens;
  let plugin: CsiVolumePlugin;
  const spec: CsiVolumeSpec = {
    podVolumeName: 'v',
    specName: 'pv-1',
    driver: DRIVER,
    volumeHandle: 'h1',
    lifecycle: 'Persistent',
    readOnly: false,
    fsType: '',
    attributes: { a: 'b' },
    mountOptions: [],
    accessMode: 'ReadWriteOnce',
    accessModes: ['ReadWriteOnce'],
  };
  const podDir = (): string => path.join(root, 'pods', 'u1');

  async function csiDriver(s: CSIDriver['spec']): Promise<void> {
    await kube.create<CSIDriver>(CSIDRIVERS, { metadata: { name: DRIVER }, spec: s });
  }

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'berth-csi-tokens-'));
    const clock = new FakeClock(1_000_000);
    kube = new FakeKubeClient({ clock });
    client = new PublishRecorder(DRIVER, new FakeCsiDriver(), { clock });
    const registry = new FakeCsiDriverRegistry();
    registry.add(client);
    tokens = new RecordingTokens();
    plugin = new CsiVolumePlugin({
      rootDir: root,
      nodeName: 'n1',
      registry,
      kube,
      mounter: new FakeMounter(),
      logger: new MemoryLogger(),
      clock,
      tokens,
    });
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('passes the tokens in the volume context and republishes on every sync', async () => {
    await csiDriver({
      attachRequired: false,
      tokenRequests: [{ audience: 'vault', expirationSeconds: 1200 }],
      requiresRepublish: true,
    });
    await plugin.setUp(pod, podDir(), spec, signal);
    await plugin.setUp(pod, podDir(), spec, signal);
    assert.equal(client.publishes.length, 2);
    const ctx = client.publishes[1]?.volumeContext ?? {};
    assert.equal(ctx['a'], 'b');
    const parsed = JSON.parse(ctx[SERVICE_ACCOUNT_TOKENS_KEY] ?? '') as Record<
      string,
      { token: string }
    >;
    assert.equal(parsed['vault']?.token, 'tok-2-vault');
    assert.deepEqual(client.publishes[1]?.secrets, {});
  });

  it('puts the tokens in the secrets with serviceAccountTokenInSecrets, publishes once without requiresRepublish', async () => {
    await csiDriver({
      attachRequired: false,
      tokenRequests: [{ audience: 'vault' }],
      serviceAccountTokenInSecrets: true,
    } as CSIDriver['spec']);
    await plugin.setUp(pod, podDir(), spec, signal);
    await plugin.setUp(pod, podDir(), spec, signal);
    assert.equal(client.publishes.length, 1);
    assert.equal(client.publishes[0]?.volumeContext[SERVICE_ACCOUNT_TOKENS_KEY], undefined);
    assert.match(client.publishes[0]?.secrets[SERVICE_ACCOUNT_TOKENS_KEY] ?? '', /tok-1-vault/);
  });

  it('a token that cannot be had fails the set-up with upstream wording, nothing published', async () => {
    await csiDriver({ attachRequired: false, tokenRequests: [{ audience: 'vault' }] });
    tokens.fail = new Error('serviceaccounts "builder" not found');
    await assert.rejects(
      plugin.setUp(pod, podDir(), spec, signal),
      /MountVolume\.SetUp failed for volume "pv-1" : kubernetes\.io\/csi: mounter\.SetUpAt failed to get service accoount token attributes: serviceaccounts "builder" not found/,
    );
    assert.equal(client.publishes.length, 0);
  });

  it('a failed republish keeps the target the pod is using', async () => {
    await csiDriver({
      attachRequired: false,
      tokenRequests: [{ audience: 'vault' }],
      requiresRepublish: true,
    });
    await plugin.setUp(pod, podDir(), spec, signal);
    const target = publishPath(podDir(), spec.specName);
    client.driver.failNext('NodePublishVolume', GrpcStatus.INTERNAL, 'token rejected');
    await assert.rejects(plugin.setUp(pod, podDir(), spec, signal), /token rejected/);
    assert.ok((await lstat(target)).isDirectory());
    await plugin.setUp(pod, podDir(), spec, signal);
    assert.equal(client.publishes.length, 2);
  });
});
