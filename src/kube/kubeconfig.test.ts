/** Kubeconfig parsing: context selection, file references, inline data, typed errors. */
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { KubeconfigError, loadKubeconfig, parseKubeconfig } from './kubeconfig.ts';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

function config(cluster: string, user: string, extra = ''): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'current-context: main',
    'clusters:',
    '- name: c1',
    '  cluster:',
    ...cluster.split('\n').map((l) => `    ${l}`),
    'users:',
    '- name: u1',
    '  user:',
    ...user.split('\n').map((l) => `    ${l}`),
    'contexts:',
    '- name: main',
    '  context: {cluster: c1, user: u1, namespace: kube-system}',
    '- name: other',
    '  context: {cluster: c1}',
    extra,
  ].join('\n');
}

function rejectsNaming(text: string, ...parts: string[]) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof KubeconfigError, String(err));
    assert.equal(err.code, 'BERTH_KUBECONFIG_INVALID');
    for (const p of [text, ...parts])
      assert.ok(err.message.includes(p), `${err.message} lacks ${p}`);
    return true;
  };
}

describe('kubeconfig', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-kubeconfig-'));
    await mkdir(join(dir, 'pki'));
    await writeFile(join(dir, 'pki', 'ca.crt'), 'CA PEM');
    await writeFile(join(dir, 'pki', 'client.crt'), 'CERT PEM');
    await writeFile(join(dir, 'pki', 'client.key'), 'KEY PEM');
    await writeFile(join(dir, 'token'), 'file-token\n');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('follows current-context and resolves files against the kubeconfig directory', async () => {
    const path = join(dir, 'kubeconfig');
    await writeFile(
      path,
      config(
        'server: https://127.0.0.1:6443/\ncertificate-authority: pki/ca.crt\ntls-server-name: kubernetes',
        'client-certificate: pki/client.crt\nclient-key: ./pki/client.key',
      ),
    );
    const entry = parseKubeconfig(
      config('server: https://h:1\ncertificate-authority: pki/ca.crt', 'token: t'),
      { path },
    );
    assert.deepEqual(entry.certificateAuthority, { file: join(dir, 'pki', 'ca.crt') });
    assert.equal(entry.namespace, 'kube-system');
    assert.equal(entry.context, 'main');
    const creds = await loadKubeconfig(path);
    assert.deepEqual(creds, {
      server: 'https://127.0.0.1:6443',
      insecureSkipTlsVerify: false,
      tlsServerName: 'kubernetes',
      ca: 'CA PEM',
      cert: 'CERT PEM',
      key: 'KEY PEM',
    });
  });

  test('reads inline -data fields, and tokenFile over token', async () => {
    const path = join(dir, 'inline');
    await writeFile(
      path,
      config(
        `server: 10.0.0.1:6443\ncertificate-authority-data: ${b64('CA')}`,
        `client-certificate-data: ${b64('C')}\nclient-key-data: ${b64('K')}\ntoken: inline\ntokenFile: token`,
      ),
    );
    const creds = await loadKubeconfig(path);
    assert.equal(creds.server, 'https://10.0.0.1:6443');
    assert.equal(creds.ca, 'CA');
    assert.equal(creds.cert, 'C');
    assert.equal(creds.key, 'K');
    assert.equal(creds.token, 'file-token');
  });

  test('a named context overrides current-context; a context without a user is anonymous', () => {
    const entry = parseKubeconfig(
      config('server: https://h:1\ninsecure-skip-tls-verify: true', 'token: t'),
      {
        path: '/x/kubeconfig',
        context: 'other',
      },
    );
    assert.equal(entry.user, '');
    assert.equal(entry.token, undefined);
    assert.equal(entry.insecureSkipTlsVerify, true);
  });

  test('errors name the file and what is missing or wrong', async () => {
    const path = '/etc/kubernetes/kubelet.conf';
    const parse = (text: string, context?: string) => () =>
      parseKubeconfig(text, context === undefined ? { path } : { path, context });
    assert.throws(parse('clusters: []'), rejectsNaming(path, 'current-context is not set'));
    assert.throws(
      parse(config('server: https://h:1', 'token: t'), 'nope'),
      rejectsNaming('context "nope"', 'present: main, other'),
    );
    assert.throws(
      parse(config('insecure-skip-tls-verify: true', 'token: t')),
      rejectsNaming('cluster "c1" has no server'),
    );
    assert.throws(
      parse(config('server: https://h:1', 'client-certificate: a.crt')),
      rejectsNaming('user "u1"', 'no client-key'),
    );
    assert.throws(
      parse(
        config(
          'server: https://h:1\ninsecure-skip-tls-verify: true\ncertificate-authority: ca',
          'token: t',
        ),
      ),
      rejectsNaming('both insecure-skip-tls-verify and a certificate authority'),
    );
    assert.throws(
      parse(config('server: https://h:1', 'exec: {command: aws}')),
      rejectsNaming('exec or auth-provider'),
    );
    assert.throws(parse('a: [b'), rejectsNaming('not valid YAML'));
    assert.throws(
      parse(config('server: 42', 'token: t')),
      rejectsNaming('clusters.0.cluster.server'),
    );
    assert.throws(parse(config('server: ftp://h', 'token: t')), rejectsNaming('not http(s)'));
    const missing = join(dir, 'missing-files');
    await writeFile(
      missing,
      config('server: https://h:1\ncertificate-authority: nowhere/ca.crt', 'token: t'),
    );
    await assert.rejects(loadKubeconfig(missing), rejectsNaming(join(dir, 'nowhere', 'ca.crt')));
    await assert.rejects(loadKubeconfig(join(dir, 'absent')), rejectsNaming('cannot read it'));
  });
});
