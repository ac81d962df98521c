/**
 * A fixed, quick subset of upstream's e2e conformance suite (test/conformance/subset.yaml,
 * specs that take under ~20 s each) against berth, on the cluster `make conformance`
 * builds (hack/conformance/run.ts): every spec must pass. The full suite, against berth
 * and the upstream kubelet, is `make conformance` (COMPATIBILITY.md).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CommandError, run } from '../harness/exec.ts';
import { loadSubset, runConformance } from '../../hack/conformance/run.ts';

/**
 * Whether the e2e binaries and CoreDNS can be built at all here (Go and the Go module
 * proxy); anything else that goes wrong is a failure, never a skip.
 */
async function prerequisites(): Promise<string | undefined> {
  try {
    await run(
      'bash',
      [join(import.meta.dirname, '../../hack/conformance/build-go.sh'), 'e2e', 'coredns'],
      {
        timeoutMs: 3_600_000,
      },
    );
    return undefined;
  } catch (err) {
    const detail =
      err instanceof CommandError
        ? err.stderr.trim().split('\n').slice(-5).join('\n')
        : String(err);
    return `upstream's e2e.test or CoreDNS cannot be built on this machine (hack/conformance/build-go.sh):\n${detail}`;
  }
}

test('upstream conformance subset passes on berth', { timeout: 1_800_000 }, async (t) => {
  const missing = await prerequisites();
  if (missing !== undefined) {
    t.skip(missing);
    return;
  }
  const subset = await loadSubset();
  const outDir = await mkdtemp(join(tmpdir(), 'berth-conformance-subset-'));
  try {
    const report = await runConformance({
      agents: ['berth'],
      subset,
      procs: 2,
      outDir,
      log: (m) => {
        t.diagnostic(m);
      },
    });
    assert.deepEqual(report.notRun, {}, 'the berth run did not complete');
    const failures = report.rows
      .map((row) => ({ name: row.name, result: row.results['berth'] }))
      .filter(({ result }) => result?.outcome !== 'passed');
    const text = failures
      .map(
        ({ name, result }) => `- ${name}: ${result?.outcome ?? 'missing'} ${result?.message ?? ''}`,
      )
      .join('\n');
    assert.equal(report.rows.length, subset.length, 'every subset spec must be selected');
    assert.equal(
      failures.length,
      0,
      `${String(failures.length)} of ${String(subset.length)} conformance specs did not pass on berth:\n${text}`,
    );
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
});
