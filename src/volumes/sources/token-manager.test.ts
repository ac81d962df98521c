/**
 * The token manager: the TokenRequest it sends, caching per key, refresh at 80% of the
 * lifetime and at 24 h, serving the old token while a refresh fails, pod cleanup.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KubeApiError } from '../../kube/types.ts';
import { FakeClock } from '../../util/clock.ts';
import { MemoryLogger } from '../../util/logger.ts';
import { VolumeError } from '../types.ts';
import { TokenManager, type TokenRequestParams } from './token-manager.ts';
import { TokenFakeClient } from './testing.ts';

const signal = new AbortController().signal;
const params: TokenRequestParams = {
  namespace: 'ns',
  serviceAccount: 'builder',
  audiences: [],
  expirationSeconds: 3600,
  pod: { name: 'web', uid: 'uid-web' },
};

function setup() {
  const clock = new FakeClock();
  const kube = new TokenFakeClient(clock);
  const logger = new MemoryLogger();
  // No jitter: refresh points are exact.
  const tokens = new TokenManager({ kube, clock, logger, random: () => 0 });
  return { clock, kube, logger, tokens };
}

describe('TokenManager', () => {
  test('POSTs a TokenRequest bound to the pod to serviceaccounts/<sa>/token', async () => {
    const { kube, tokens, clock } = setup();
    const token = await tokens.getToken({ ...params, audiences: ['vault'] }, signal);
    assert.equal(token.token, 'token-1');
    assert.equal(token.expiresAt, clock.now() + 3600_000);
    assert.deepEqual(kube.tokenRequests[0], {
      resource: 'serviceaccounts',
      subresource: 'token',
      namespace: 'ns',
      serviceAccount: 'builder',
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        metadata: { name: 'builder', namespace: 'ns' },
        spec: {
          audiences: ['vault'],
          expirationSeconds: 3600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'web', uid: 'uid-web' },
        },
      },
    });
  });

  test('caches per key: same params reuse the token, other audience or pod do not', async () => {
    const { kube, tokens } = setup();
    assert.equal((await tokens.getToken(params, signal)).token, 'token-1');
    assert.equal((await tokens.getToken(params, signal)).token, 'token-1');
    assert.equal((await tokens.getToken({ ...params, audiences: ['x'] }, signal)).token, 'token-2');
    const other = { ...params, pod: { name: 'web', uid: 'uid-2' } };
    assert.equal((await tokens.getToken(other, signal)).token, 'token-3');
    assert.equal(kube.tokenRequests.length, 3);
  });

  test('refreshes once older than 80% of the lifetime', async () => {
    const { clock, tokens } = setup();
    await tokens.getToken(params, signal);
    await clock.advance(2880_000); // exactly 80%: still fresh
    assert.equal((await tokens.getToken(params, signal)).token, 'token-1');
    await clock.advance(1);
    assert.equal((await tokens.getToken(params, signal)).token, 'token-2');
  });

  test('refreshes a long-lived token after 24 h', async () => {
    const { clock, tokens } = setup();
    const week = { ...params, expirationSeconds: 7 * 24 * 3600 };
    await tokens.getToken(week, signal);
    await clock.advance(24 * 3600_000);
    assert.equal((await tokens.getToken(week, signal)).token, 'token-1');
    await clock.advance(1);
    assert.equal((await tokens.getToken(week, signal)).token, 'token-2');
  });

  test('uses the lifetime the apiserver granted to plan the refresh', async () => {
    const { clock, kube, tokens } = setup();
    kube.grantSeconds = 1000;
    await tokens.getToken(params, signal);
    await clock.advance(800_001);
    assert.equal((await tokens.getToken(params, signal)).token, 'token-2');
  });

  test('serves the old token while a refresh fails, fails once it expired', async () => {
    const { clock, kube, logger, tokens } = setup();
    await tokens.getToken(params, signal);
    await clock.advance(3000_000);
    kube.tokenFailure = { error: new KubeApiError(0, 'Unknown', 'connection refused'), times: 10 };
    assert.equal((await tokens.getToken(params, signal)).token, 'token-1');
    assert.ok(
      logger.records.some((r) => r.level === 'error' && /Couldn't update token/.test(r.msg)),
    );
    assert.ok(!JSON.stringify(logger.records).includes('token-1'), 'the token is never logged');
    await clock.advance(600_001);
    await assert.rejects(
      tokens.getToken(params, signal),
      (err: unknown) =>
        err instanceof VolumeError &&
        err.code === 'BERTH_VOLUME_SOURCE_ERROR' &&
        /expired and refresh failed: connection refused/.test(err.message),
    );
  });

  test('a first request that fails is an error; expirationSeconds below 600 is refused', async () => {
    const { kube, tokens } = setup();
    kube.tokenFailure = { error: new KubeApiError(403, 'Forbidden', 'no'), times: 1 };
    await assert.rejects(
      tokens.getToken(params, signal),
      /^VolumeError: failed to fetch token: no$/,
    );
    await assert.rejects(
      tokens.getToken({ ...params, expirationSeconds: 599 }, signal),
      (err: unknown) => err instanceof VolumeError && err.code === 'BERTH_VOLUME_INVALID',
    );
    assert.equal(kube.tokenRequests.length, 1);
  });

  test('deletePodTokens and cleanup drop entries', async () => {
    const { clock, tokens } = setup();
    await tokens.getToken(params, signal);
    await tokens.getToken({ ...params, pod: { name: 'b', uid: 'uid-b' } }, signal);
    tokens.deletePodTokens('uid-web');
    assert.equal(tokens.size, 1);
    await clock.advance(3600_001);
    tokens.cleanup();
    assert.equal(tokens.size, 0);
  });

  test('run cleans up every minute until aborted', async () => {
    const { clock, tokens } = setup();
    await tokens.getToken(params, signal);
    const controller = new AbortController();
    const running = tokens.run(controller.signal);
    await clock.advance(3600_000);
    assert.equal(tokens.size, 1);
    await clock.advance(60_000);
    assert.equal(tokens.size, 0);
    controller.abort();
    await running;
    assert.equal(clock.pending, 0);
  });
});
