/**
 * A node's identity in a test cluster, made the way an administrator would without TLS
 * bootstrap: a client certificate the Node authorizer and NodeRestriction recognise
 * (CN system:node:<name>, O system:nodes), a serving certificate for the node's HTTPS
 * server (127.0.0.1 and the node name), both signed by the cluster CA with openssl, and
 * a kubeconfig naming the files. Any node agent of the tests can use it: the upstream
 * kubelet and berth alike.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Cluster } from './cluster.ts';
import { kubeconfig, makeLeaf, type CertPair } from './pki.ts';

export interface NodeIdentity {
  readonly nodeName: string;
  /** Directory holding the keys, certificates and the kubeconfig. */
  readonly dir: string;
  /** Path of a kubeconfig that authenticates as system:node:<nodeName>. */
  readonly kubeconfig: string;
  /** Client certificate: CN system:node:<nodeName>, O system:nodes, clientAuth. */
  readonly clientCert: CertPair;
  /** Serving certificate: serverAuth, SANs IP:127.0.0.1 and DNS:<nodeName>. */
  readonly servingCert: CertPair;
  /** The cluster CA that signed both, and that clients of the node's server trust. */
  readonly caFile: string;
}

export interface NodeIdentityOptions {
  /** Where to write the files; defaults to <cluster root>/nodes/<nodeName>/pki. */
  readonly dir?: string;
  /** Validity in days (default 365). */
  readonly days?: number;
  /** More serving-certificate SANs, e.g. "IP:10.88.5.1" for a node reached on a bridge. */
  readonly extraSans?: readonly string[];
}

/** Lowercase DNS label: usable as a node name, a certificate subject and a SAN alike. */
const NODE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Throws unless `nodeName` is a DNS label (what the harness's node agents accept). */
export function checkNodeName(nodeName: string): void {
  if (!NODE_NAME.test(nodeName)) {
    throw new Error(
      `Cannot use ${JSON.stringify(nodeName)} as a node name: it must be a lowercase DNS label (a-z, 0-9, '-', at most 63 characters)`,
    );
  }
}

/**
 * Creates the client and serving certificates of node `nodeName` and its kubeconfig
 * (pointing at the cluster's apiserver). Calling it twice for one node replaces the
 * files.
 */
export async function createNodeIdentity(
  cluster: Pick<Cluster, 'root' | 'pki' | 'controlPlane'>,
  nodeName: string,
  options: NodeIdentityOptions = {},
): Promise<NodeIdentity> {
  checkNodeName(nodeName);
  const dir = options.dir ?? join(cluster.root, 'nodes', nodeName, 'pki');
  const days = options.days ?? 365;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const ca = cluster.pki.ca;
  const [clientCert, servingCert] = await Promise.all([
    makeLeaf(dir, ca, {
      days,
      name: 'node-client',
      subject: `/O=system:nodes/CN=system:node:${nodeName}`,
      usage: 'clientAuth',
    }),
    makeLeaf(dir, ca, {
      days,
      name: 'node-serving',
      subject: `/CN=${nodeName}`,
      usage: 'serverAuth',
      sans: ['IP:127.0.0.1', `DNS:${nodeName}`, ...(options.extraSans ?? [])],
    }),
  ]);
  const kubeconfigPath = join(dir, 'kubeconfig');
  await writeFile(
    kubeconfigPath,
    kubeconfig(cluster.controlPlane.server, ca.cert, clientCert, `system:node:${nodeName}`),
    { mode: 0o600 },
  );
  return { nodeName, dir, kubeconfig: kubeconfigPath, clientCert, servingCert, caFile: ca.cert };
}
