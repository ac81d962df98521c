/**
 * Standalone mode (no --kubeconfig, as upstream decides it): berth runs its static
 * pods with no API server. What a configuration may ask for then is what upstream's
 * BuildAuth accepts without a client: webhook authentication and Webhook
 * authorization ask the API server about every request, so a configuration with
 * either is refused at start (upstream's messages, with the field to change).
 */
import type { KubeletConfig } from '../config/types.ts';

/** Why `k` cannot run without an API server; undefined when it can. */
export function standaloneConfigProblem(k: KubeletConfig): string | undefined {
  // Upstream builds the authenticator first, so its error is the one reported.
  if (k.authentication.webhook.enabled)
    return (
      'no client provided, cannot use webhook authentication: authentication.webhook.enabled ' +
      'must be false without --kubeconfig (standalone mode)'
    );
  if (k.authorization.mode === 'Webhook')
    return (
      'no client provided, cannot use webhook authorization: authorization.mode must be ' +
      'AlwaysAllow without --kubeconfig (standalone mode)'
    );
  // berth never serves a self-signed certificate, and none can be requested here.
  if (
    k.enableServer &&
    k.serverTLSBootstrap &&
    (k.tlsCertFile === null || k.tlsPrivateKeyFile === null)
  )
    return (
      'serverTLSBootstrap cannot get a serving certificate without an API server: set ' +
      'tlsCertFile and tlsPrivateKeyFile when running without --kubeconfig (standalone mode)'
    );
  return undefined;
}
