/**
 * TLS bootstrap as kubeadm sets it up: a bootstrap token Secret in kube-system, the
 * RBAC bindings that let system:bootstrappers file node-client CSRs (auto-approved by
 * kube-controller-manager) and nodes renew their own, a bootstrap kubeconfig holding
 * the token; and an operator's approval of serving CSRs, which upstream never
 * approves automatically.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import type { Cluster } from './cluster.ts';
import { applyJson, getJson } from './kube-helpers.ts';

const BOOTSTRAP_GROUP = 'system:bootstrappers:kubeadm:default-node-token';

export interface BootstrapToken {
  readonly id: string;
  readonly secret: string;
  /** `<id>.<secret>`, what goes into the kubeconfig. */
  readonly token: string;
}

/** Creates a bootstrap token (expiring at `expires`) and kubeadm's bindings (idempotent). */
export async function createBootstrapToken(
  cluster: Cluster,
  options: { expires?: Date } = {},
): Promise<BootstrapToken> {
  const id = randomBytes(3).toString('hex');
  const secret = randomBytes(8).toString('hex');
  await applyJson(cluster, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `bootstrap-token-${id}`, namespace: 'kube-system' },
    type: 'bootstrap.kubernetes.io/token',
    stringData: {
      'token-id': id,
      'token-secret': secret,
      'usage-bootstrap-authentication': 'true',
      'usage-bootstrap-signing': 'true',
      'auth-extra-groups': BOOTSTRAP_GROUP,
      expiration: (options.expires ?? new Date(Date.now() + 3_600_000)).toISOString(),
    },
  });
  const binding = (name: string, role: string, group: string) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }],
  });
  await applyJson(
    cluster,
    binding('kubeadm:kubelet-bootstrap', 'system:node-bootstrapper', BOOTSTRAP_GROUP),
  );
  await applyJson(
    cluster,
    binding(
      'kubeadm:node-autoapprove-bootstrap',
      'system:certificates.k8s.io:certificatesigningrequests:nodeclient',
      BOOTSTRAP_GROUP,
    ),
  );
  await applyJson(
    cluster,
    binding(
      'kubeadm:node-autoapprove-certificate-rotation',
      'system:certificates.k8s.io:certificatesigningrequests:selfnodeclient',
      'system:nodes',
    ),
  );
  return { id, secret, token: `${id}.${secret}` };
}

/** A kubeconfig that authenticates with `token`. */
export async function writeBootstrapKubeconfig(
  cluster: Cluster,
  path: string,
  token: string,
): Promise<void> {
  await writeFile(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: berth',
      '  cluster:',
      `    server: ${cluster.controlPlane.server}`,
      `    certificate-authority: ${cluster.pki.ca.cert}`,
      'users:',
      '- name: bootstrap',
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: berth',
      '  context:',
      '    cluster: berth',
      '    user: bootstrap',
      'current-context: berth',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
}

interface Csr {
  metadata: { name: string };
  spec: { signerName: string; username: string };
  status?: { conditions?: { type: string }[] };
}

/** Approves every pending kubelet-serving CSR of `nodeName`; returns their names. */
export async function approveServingCsrs(cluster: Cluster, nodeName: string): Promise<string[]> {
  const list = await getJson<{ items: Csr[] }>(cluster, ['get', 'csr']);
  const pending = (list?.items ?? []).filter(
    (c) =>
      c.spec.signerName === 'kubernetes.io/kubelet-serving' &&
      c.spec.username === `system:node:${nodeName}` &&
      (c.status?.conditions ?? []).length === 0,
  );
  for (const c of pending) await cluster.kubectl(['certificate', 'approve', c.metadata.name]);
  return pending.map((c) => c.metadata.name);
}

/** Approves serving CSRs of `nodeName` every `intervalMs` until `signal` aborts. */
export async function keepApprovingServingCsrs(
  cluster: Cluster,
  nodeName: string,
  signal: AbortSignal,
  intervalMs = 1000,
): Promise<string[]> {
  const approved: string[] = [];
  while (!signal.aborted) {
    approved.push(...(await approveServingCsrs(cluster, nodeName).catch(() => [])));
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  return approved;
}
