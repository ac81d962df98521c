/**
 * The pure parts of the API client: resource paths and query strings, metav1.Status and
 * watch ERROR events to KubeApiError, watch event lines, the User-Agent.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { queryString, resourceUrlPath } from './paths.ts';
import { errorFromStatus, failureStatus, statusFromWatchError } from './status.ts';
import { inNamespace, isGone, KubeApiError, LEASES, NODES, PODS } from './types.ts';
import { defaultUserAgent } from './user-agent.ts';
import { parseEvent } from './watch-stream.ts';

describe('resourceUrlPath and queryString', () => {
  test('core and group resources, namespaced or not, with subresources', () => {
    assert.equal(resourceUrlPath(NODES), '/api/v1/nodes');
    assert.equal(resourceUrlPath(NODES, 'n1', 'status'), '/api/v1/nodes/n1/status');
    assert.equal(resourceUrlPath(inNamespace(PODS, 'ns'), 'p'), '/api/v1/namespaces/ns/pods/p');
    assert.equal(
      resourceUrlPath(inNamespace(LEASES, 'kube-node-lease'), 'n1'),
      '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1',
    );
    assert.equal(resourceUrlPath(LEASES), '/apis/coordination.k8s.io/v1/leases');
    assert.equal(resourceUrlPath(inNamespace(PODS, '')), '/api/v1/pods');
    assert.equal(resourceUrlPath(PODS, 'a b/c'), '/api/v1/pods/a%20b%2Fc');
    assert.throws(() => resourceUrlPath(PODS, undefined, 'status'), /without an object name/);
    assert.throws(() => resourceUrlPath(PODS, ''), /name is empty/);
    assert.throws(() => resourceUrlPath({ group: '', version: '', resource: 'pods' }));
  });
  test('queryString skips undefined and encodes values', () => {
    assert.equal(queryString({}), '');
    assert.equal(
      queryString({ a: undefined, fieldSelector: 'spec.nodeName=n1', limit: 5, watch: true }),
      '?fieldSelector=spec.nodeName%3Dn1&limit=5&watch=true',
    );
  });
});

describe('error mapping', () => {
  test('a metav1.Status gives status, reason and message', () => {
    const err = errorFromStatus(
      failureStatus(404, 'NotFound', 'pods "p" not found'),
      404,
      'GET /api/v1/pods/p',
    );
    assert.equal(err.status, 404);
    assert.equal(err.reason, 'NotFound');
    assert.equal(err.code, 'BERTH_KUBE_NOTFOUND');
    assert.equal(err.message, 'GET /api/v1/pods/p: pods "p" not found');
  });
  test('unknown reasons fall back to the HTTP status; ServerTimeout is Timeout', () => {
    assert.equal(errorFromStatus({ reason: 'ServerTimeout' }, 504).reason, 'Timeout');
    assert.equal(errorFromStatus({ reason: 'Frobbed' }, 422).reason, 'Invalid');
    assert.equal(errorFromStatus(undefined, 429).reason, 'TooManyRequests');
    assert.equal(errorFromStatus(undefined, 503).reason, 'Unknown');
    assert.equal(errorFromStatus(undefined, 503).status, 503);
  });
  test('watch ERROR events: 410 Expired is gone; anything else is Unknown', () => {
    const expired = statusFromWatchError(failureStatus(410, 'Expired', 'too old resource version'));
    assert.ok(isGone(expired));
    assert.equal(expired.reason, 'Expired');
    assert.equal(statusFromWatchError({ nope: 1 }).reason, 'Unknown');
  });
  test('parseEvent rejects malformed lines and unknown types', () => {
    assert.throws(
      () => parseEvent('{"type":'),
      (e: unknown) => e instanceof KubeApiError,
    );
    assert.throws(() => parseEvent('{"type":"FOO","object":{}}'), /unknown type/);
    assert.equal(parseEvent('{"type":"ADDED","object":{}}').type, 'ADDED');
  });
  test('the User-Agent names berth, the platform and the Kubernetes version', () => {
    assert.equal(defaultUserAgent('linux', 'x64'), 'berth/0.1.0 (linux/amd64) kubernetes/v1.37.2');
    assert.equal(
      defaultUserAgent('linux', 'arm64'),
      'berth/0.1.0 (linux/arm64) kubernetes/v1.37.2',
    );
  });
});
