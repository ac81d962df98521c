/**
 * Test support (unit tests only): a CA made with openssl, and a fake approver that
 * watches a FakeKubeClient for CSRs and approves and signs, denies, or leaves them, as
 * kube-controller-manager or an operator would. `openssl ca` rather than `x509 -req`
 * so validity can follow the test's FakeClock (-startdate / -enddate).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CertificateSigningRequest } from 'kubernetes-types/certificates/v1.js';
import type { Clock } from '../util/clock.ts';
import type { FakeKubeClient } from '../kube/fake-client.ts';
import { CSRS } from './request.ts';

/** openssl's ASN.1 time for `-startdate` / `-enddate`. */
function asn1Time(ms: number): string {
  return `${new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;
}

export class TestCa {
  readonly dir: string;
  readonly caPem: string;
  readonly #clock: Clock;
  #serial = 1;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.dir = mkdtempSync(join(tmpdir(), 'berth-test-ca-'));
    const d = this.dir;
    mkdirSync(join(d, 'new'));
    writeFileSync(join(d, 'index.txt'), '');
    writeFileSync(join(d, 'serial'), '1000\n');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(d, 'ca.key'),
        '-out',
        join(d, 'ca.pem'),
        '-subj',
        '/CN=test-ca',
        '-days',
        '3650',
      ],
      { stdio: 'pipe' },
    );
    writeFileSync(
      join(d, 'ca.cnf'),
      [
        '[ca]',
        'default_ca = d',
        '[d]',
        `database = ${join(d, 'index.txt')}`,
        `new_certs_dir = ${join(d, 'new')}`,
        `serial = ${join(d, 'serial')}`,
        'default_md = sha256',
        'policy = any',
        'copy_extensions = copyall',
        'unique_subject = no',
        'email_in_dn = no',
        '[any]',
        'organizationName = optional',
        'commonName = supplied',
        '',
      ].join('\n'),
    );
    this.caPem = readFileSync(join(d, 'ca.pem'), 'utf8');
  }

  /** Signs `csrPem` valid from the clock's now for `lifetimeMs`. */
  sign(csrPem: string, lifetimeMs: number): string {
    const d = this.dir;
    const n = this.#serial++;
    const csrFile = join(d, `req-${n}.pem`);
    const out = join(d, `cert-${n}.pem`);
    writeFileSync(csrFile, csrPem);
    const now = Math.floor(this.#clock.now() / 1000) * 1000;
    execFileSync(
      'openssl',
      [
        'ca',
        '-batch',
        '-config',
        join(d, 'ca.cnf'),
        '-cert',
        join(d, 'ca.pem'),
        '-keyfile',
        join(d, 'ca.key'),
        '-in',
        csrFile,
        '-out',
        out,
        '-notext',
        '-preserveDN',
        '-startdate',
        asn1Time(now),
        '-enddate',
        asn1Time(now + lifetimeMs),
      ],
      { stdio: 'pipe' },
    );
    return readFileSync(out, 'utf8');
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export type ApproverDecision =
  | { readonly action: 'approve'; readonly lifetimeMs: number }
  | { readonly action: 'deny'; readonly message: string }
  | { readonly action: 'ignore' };

/** Watches CSRs and answers each new one with `decide`; `seen` lists them in order. */
export class FakeApprover {
  readonly seen: CertificateSigningRequest[] = [];
  readonly #client: FakeKubeClient;
  readonly #ca: TestCa;
  readonly #decide: (csr: CertificateSigningRequest) => ApproverDecision;
  readonly #controller = new AbortController();
  #done: Promise<void> = Promise.resolve();

  constructor(
    client: FakeKubeClient,
    ca: TestCa,
    decide: (csr: CertificateSigningRequest) => ApproverDecision,
  ) {
    this.#client = client;
    this.#ca = ca;
    this.#decide = decide;
  }

  start(): void {
    this.#done = this.#run();
  }

  async stop(): Promise<void> {
    this.#controller.abort();
    await this.#done;
  }

  /** Approves and signs CSR `name` now (the operator's `kubectl certificate approve`). */
  async approve(name: string, lifetimeMs: number): Promise<void> {
    const csr = await this.#client.get<CertificateSigningRequest>(CSRS, name);
    const request = Buffer.from(csr.spec.request, 'base64').toString('utf8');
    const certificate = Buffer.from(this.#ca.sign(request, lifetimeMs)).toString('base64');
    await this.#client.update(
      CSRS,
      name,
      {
        ...csr,
        status: {
          conditions: [{ type: 'Approved', status: 'True', reason: 'Test', message: 'approved' }],
          certificate,
        },
      },
      { subresource: 'status' },
    );
  }

  async deny(name: string, message: string): Promise<void> {
    const csr = await this.#client.get<CertificateSigningRequest>(CSRS, name);
    await this.#client.update(
      CSRS,
      name,
      {
        ...csr,
        status: { conditions: [{ type: 'Denied', status: 'True', reason: 'Test', message }] },
      },
      { subresource: 'status' },
    );
  }

  async #run(): Promise<void> {
    const signal = this.#controller.signal;
    for await (const event of this.#client.watch<CertificateSigningRequest>(CSRS, { signal })) {
      if (event.type !== 'ADDED') continue;
      const csr = event.object;
      this.seen.push(csr);
      const name = csr.metadata?.name ?? '';
      const decision = this.#decide(csr);
      if (decision.action === 'approve') await this.approve(name, decision.lifetimeMs);
      if (decision.action === 'deny') await this.deny(name, decision.message);
    }
  }
}
