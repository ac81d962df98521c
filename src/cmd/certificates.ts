/**
 * The node's certificates at start-up (upstream's kubelet server.go order): bootstrap
 * the client certificate from --bootstrap-kubeconfig when the kubeconfig has none,
 * then, with rotateCertificates, a manager that renews it (new connections pick it up
 * through HttpKubeClient.reload), and with serverTLSBootstrap one for the :10250
 * serving certificate.
 */
import { readFile } from 'node:fs/promises';
import {
  bootstrapClientCertificate,
  CertificateManager,
  CertificateStore,
  clientTemplate,
  servingTemplate,
} from '../certificate/index.ts';
import type { BerthConfig } from '../config/load.ts';
import type { KubeletConfig } from '../config/types.ts';
import { HttpKubeClient } from '../kube/http-client.ts';
import { parseKubeconfig, readCredentials } from '../kube/kubeconfig.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

export interface NodeCertificateOptions {
  readonly config: Pick<BerthConfig, 'bootstrapKubeconfig' | 'certDir' | 'nodeName'> & {
    readonly kubeconfig: string;
  };
  readonly k: Pick<KubeletConfig, 'rotateCertificates' | 'serverTLSBootstrap'>;
  readonly nodeIPs: readonly string[];
  readonly clock: Clock;
  readonly logger: Logger;
}

function ignoreMissing(err: unknown): undefined {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
  throw err;
}

/** Bootstraps the client certificate when --bootstrap-kubeconfig is set (may wait for approval). */
export async function bootstrapIfConfigured(
  o: NodeCertificateOptions,
  signal: AbortSignal,
): Promise<void> {
  const bootstrap = o.config.bootstrapKubeconfig;
  if (bootstrap === null) return;
  await bootstrapClientCertificate({
    kubeconfigPath: o.config.kubeconfig,
    bootstrapKubeconfigPath: bootstrap,
    certDir: o.config.certDir,
    nodeName: o.config.nodeName,
    clock: o.clock,
    logger: o.logger,
    signal,
    connect: (credentials) =>
      new HttpKubeClient({
        credentials,
        clock: o.clock,
        logger: o.logger.child({ component: 'bootstrap-client' }),
      }),
  });
}

export interface RunningCertificates {
  /** The serving certificate, with serverTLSBootstrap. */
  readonly serving?: CertificateManager;
  /** Resolves once every manager's loop has ended (after the signal aborted). */
  stopped(): Promise<void>;
}

/** Starts the client and serving certificate managers the configuration asks for. */
export async function startCertificateManagers(
  o: NodeCertificateOptions,
  kube: HttpKubeClient,
  signal: AbortSignal,
): Promise<RunningCertificates> {
  const managers: CertificateManager[] = [];
  const bootstrap = o.config.bootstrapKubeconfig;
  // Without a valid certificate, CSRs go out with the bootstrap token (upstream's fallback).
  // Upstream reads the bootstrap kubeconfig only when the kubeconfig is unusable: on a
  // kubeadm control-plane node the flag names a file that `kubeadm init` never writes.
  const bootstrapText =
    bootstrap === null ? undefined : await readFile(bootstrap, 'utf8').catch(ignoreMissing);
  const fallback =
    bootstrap === null || bootstrapText === undefined
      ? undefined
      : await readCredentials(parseKubeconfig(bootstrapText, { path: bootstrap }));
  // The kubeconfig's own client pair seeds the store (upstream's bootstrap certificate).
  const own = await readCredentials(
    parseKubeconfig(await readFile(o.config.kubeconfig, 'utf8'), { path: o.config.kubeconfig }),
  );
  if (o.k.rotateCertificates) {
    const client = new CertificateManager({
      kind: 'client',
      store: new CertificateStore({
        dir: o.config.certDir,
        pairName: 'kubelet-client',
        clock: o.clock,
      }),
      client: kube,
      ...(fallback !== undefined && {
        fallbackClient: () => new HttpKubeClient({ credentials: fallback, clock: o.clock }),
      }),
      template: () => clientTemplate(o.config.nodeName),
      ...(own.cert !== undefined &&
        own.key !== undefined && { bootstrapPair: { certPem: own.cert, keyPem: own.key } }),
      clock: o.clock,
      logger: o.logger,
    });
    client.onRotate(async () => {
      // The kubeconfig names kubelet-client-current.pem, which now is the new pair.
      await kube.reload();
    });
    await client.start(signal);
    managers.push(client);
  }
  let serving: CertificateManager | undefined;
  if (o.k.serverTLSBootstrap) {
    serving = new CertificateManager({
      kind: 'serving',
      store: new CertificateStore({
        dir: o.config.certDir,
        pairName: 'kubelet-server',
        clock: o.clock,
      }),
      client: kube,
      template: () =>
        servingTemplate(o.config.nodeName, [
          ...o.nodeIPs.map((address) => ({ type: 'InternalIP', address })),
          { type: 'Hostname', address: o.config.nodeName },
        ]),
      clock: o.clock,
      logger: o.logger,
    });
    await serving.start(signal);
    managers.push(serving);
  }
  return {
    ...(serving !== undefined && { serving }),
    stopped: async () => {
      await Promise.all(managers.map((m) => m.stopped()));
    },
  };
}
