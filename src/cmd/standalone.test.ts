import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { applyDefaults } from '../config/defaults.ts';
import type { KubeletConfig } from '../config/types.ts';
import { standaloneConfigProblem } from './standalone.ts';

describe('standaloneConfigProblem', () => {
  const defaults = applyDefaults(null);
  const withAuth = (
    webhook: boolean,
    mode: KubeletConfig['authorization']['mode'],
  ): KubeletConfig => ({
    ...defaults,
    authentication: {
      ...defaults.authentication,
      webhook: { ...defaults.authentication.webhook, enabled: webhook },
    },
    authorization: { ...defaults.authorization, mode },
  });
  // What standalone mode allows: x509 (and anonymous) authentication, AlwaysAllow.
  const allowed = withAuth(false, 'AlwaysAllow');

  test('webhook authentication off and AlwaysAllow run standalone', () => {
    assert.equal(standaloneConfigProblem(allowed), undefined);
  });

  test('webhook authentication is refused first, naming the field (as upstream BuildAuthn)', () => {
    assert.match(
      standaloneConfigProblem(withAuth(true, 'Webhook')) ?? '',
      /^no client provided, cannot use webhook authentication: authentication\.webhook\.enabled must be false/,
    );
  });

  test('Webhook authorization is refused, naming the field (as upstream BuildAuthz)', () => {
    assert.match(
      standaloneConfigProblem(withAuth(false, 'Webhook')) ?? '',
      /^no client provided, cannot use webhook authorization: authorization\.mode must be AlwaysAllow/,
    );
  });

  test('the config file defaults (webhook on) are refused', () => {
    const file = applyDefaults({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
    });
    assert.notEqual(standaloneConfigProblem(file), undefined);
  });

  test('serverTLSBootstrap without certificate files is refused: no API server signs the CSR', () => {
    assert.match(
      standaloneConfigProblem({ ...allowed, serverTLSBootstrap: true, tlsCertFile: null }) ?? '',
      /serverTLSBootstrap/,
    );
  });
});
