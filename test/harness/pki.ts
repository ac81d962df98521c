/**
 * A per-cluster PKI made with the openssl CLI: cluster CA, apiserver serving cert for
 * 127.0.0.1/localhost (plus the addresses pods use: the bridge gateway and the
 * kubernetes Service IP), service-account signing key, and client certs for the admin,
 * controller-manager, scheduler, kube-proxy and the apiserver's connection to kubelets
 * (plus, opt-in, the front-proxy PKI of API aggregation). ECDSA
 * P-256 throughout: fast to generate, accepted by every component.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.ts';

export interface CertPair {
  readonly cert: string;
  readonly key: string;
}

export interface ClusterPki {
  readonly dir: string;
  readonly ca: CertPair;
  readonly apiserver: CertPair;
  readonly registry: CertPair;
  readonly admin: CertPair;
  readonly controllerManager: CertPair;
  readonly scheduler: CertPair;
  readonly kubeletClient: CertPair;
  /** User system:kube-proxy, which the bootstrap binding system:node-proxier covers. */
  readonly kubeProxy: CertPair;
  /** Service-account signing key (private) and its public half. */
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;
  /** Present with `frontProxy: true`: what API aggregation needs. */
  readonly frontProxy?: FrontProxyPki;
}

/**
 * The request-header (front proxy) PKI of API aggregation, as kubeadm lays it out: a CA of
 * its own, so that no ordinary client certificate of the cluster CA can pose as the
 * apiserver's proxy and assert any user in X-Remote-User, and the apiserver's client
 * certificate (CN front-proxy-client) for proxying to aggregated API servers.
 */
export interface FrontProxyPki {
  readonly ca: CertPair;
  readonly client: CertPair;
  /** The CN the apiserver's --requestheader-allowed-names lists. */
  readonly clientName: string;
}

/** A leaf certificate to sign with the cluster CA. */
export interface LeafSpec {
  readonly name: string;
  readonly subject: string;
  readonly usage: 'serverAuth' | 'clientAuth';
  readonly sans?: readonly string[];
  /** Validity (default 365 days). */
  readonly days?: number;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A new P-256 key and a certificate for it signed by `ca`, written to `dir`. */
export async function makeLeaf(dir: string, ca: CertPair, spec: LeafSpec): Promise<CertPair> {
  const key = join(dir, `${spec.name}.key`);
  const csr = join(dir, `${spec.name}.csr`);
  const cert = join(dir, `${spec.name}.crt`);
  const ext = join(dir, `${spec.name}.ext`);
  await run('openssl', ['req', '-new', ...EC, '-keyout', key, '-out', csr, '-subj', spec.subject]);
  const lines = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage=${spec.usage}`,
  ];
  if (spec.sans !== undefined) lines.push(`subjectAltName=${spec.sans.join(',')}`);
  await writeFile(ext, lines.join('\n') + '\n');
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    // A random serial per cert: parallel signing must not share a serial file.
    '-set_serial',
    `0x${randomBytes(16).toString('hex')}`,
    '-days',
    String(spec.days ?? 365),
    '-sha256',
    '-extfile',
    ext,
    '-out',
    cert,
  ]);
  return { cert, key };
}

export interface ClusterPkiOptions {
  /** More apiserver SANs, e.g. ['IP:10.88.3.1', 'IP:10.96.0.1']. */
  readonly apiserverSans?: readonly string[];
  /** Also make the front-proxy CA and client certificate (API aggregation). */
  readonly frontProxy?: boolean;
}

/** A self-signed CA certificate and key `<name>.crt`/`<name>.key` in `dir`. */
export async function makeCa(dir: string, name: string, commonName: string): Promise<CertPair> {
  const ca: CertPair = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  await run('openssl', [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    ca.key,
    '-out',
    ca.cert,
    '-days',
    '3650',
    '-sha256',
    '-subj',
    `/CN=${commonName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  return ca;
}

const FRONT_PROXY_CLIENT = 'front-proxy-client';

async function createFrontProxyPki(dir: string): Promise<FrontProxyPki> {
  const ca = await makeCa(dir, 'front-proxy-ca', 'berth-front-proxy-ca');
  const client = await makeLeaf(dir, ca, {
    name: FRONT_PROXY_CLIENT,
    subject: `/CN=${FRONT_PROXY_CLIENT}`,
    usage: 'clientAuth',
  });
  return { ca, client, clientName: FRONT_PROXY_CLIENT };
}

export async function createClusterPki(
  dir: string,
  options: ClusterPkiOptions = {},
): Promise<ClusterPki> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const ca = await makeCa(dir, 'ca', 'berth-cluster-ca');
  const localSans = ['IP:127.0.0.1', 'DNS:localhost'];
  const [apiserver, registry, admin, controllerManager, scheduler, kubeletClient, kubeProxy] =
    await Promise.all([
      makeLeaf(dir, ca, {
        name: 'apiserver',
        subject: '/CN=kube-apiserver',
        usage: 'serverAuth',
        sans: [
          ...localSans,
          'DNS:kubernetes',
          'DNS:kubernetes.default',
          'DNS:kubernetes.default.svc',
          'DNS:kubernetes.default.svc.cluster.local',
          ...(options.apiserverSans ?? []),
        ],
      }),
      makeLeaf(dir, ca, {
        name: 'registry',
        subject: '/CN=berth-registry',
        usage: 'serverAuth',
        sans: localSans,
      }),
      makeLeaf(dir, ca, {
        name: 'admin',
        subject: '/O=system:masters/CN=berth-admin',
        usage: 'clientAuth',
      }),
      makeLeaf(dir, ca, {
        name: 'controller-manager',
        subject: '/CN=system:kube-controller-manager',
        usage: 'clientAuth',
      }),
      makeLeaf(dir, ca, {
        name: 'scheduler',
        subject: '/CN=system:kube-scheduler',
        usage: 'clientAuth',
      }),
      // The identity the apiserver presents to kubelets for logs/exec/port-forward.
      makeLeaf(dir, ca, {
        name: 'apiserver-kubelet-client',
        subject: '/O=system:masters/CN=kube-apiserver-kubelet-client',
        usage: 'clientAuth',
      }),
      makeLeaf(dir, ca, {
        name: 'kube-proxy',
        subject: '/CN=system:kube-proxy',
        usage: 'clientAuth',
      }),
    ]);
  const serviceAccountKey = join(dir, 'sa.key');
  const serviceAccountPub = join(dir, 'sa.pub');
  await run('openssl', [
    'genpkey',
    '-algorithm',
    'EC',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-out',
    serviceAccountKey,
  ]);
  await run('openssl', ['pkey', '-in', serviceAccountKey, '-pubout', '-out', serviceAccountPub]);
  const frontProxy = options.frontProxy === true ? await createFrontProxyPki(dir) : undefined;
  return {
    dir,
    ca,
    apiserver,
    registry,
    admin,
    controllerManager,
    scheduler,
    kubeletClient,
    kubeProxy,
    serviceAccountKey,
    serviceAccountPub,
    ...(frontProxy !== undefined && { frontProxy }),
  };
}

/** A kubeconfig that names files (not inline data), so rotation on disk is picked up. */
export function kubeconfig(server: string, caFile: string, client: CertPair, user: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: berth',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority: ${caFile}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    client-certificate: ${client.cert}`,
    `    client-key: ${client.key}`,
    'contexts:',
    '- name: berth',
    '  context:',
    '    cluster: berth',
    `    user: ${user}`,
    'current-context: berth',
    '',
  ].join('\n');
}
