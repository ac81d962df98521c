/**
 * The conformance runner's selection (test/conformance/skips.yaml as data) and report:
 * every skipped spec names its reason, the subset list names real selected specs, and a
 * spec failing for every agent is marked environmental.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  buildRows,
  counts,
  summaryMarkdown,
  type SpecResult,
} from '../../hack/conformance/report.ts';
import { classify, escapeRegExp, loadSelection } from '../../hack/conformance/selection.ts';
import { loadSubset } from '../../hack/conformance/run.ts';

describe('conformance selection', () => {
  test('the skip list loads, every entry with a reason; slow specs come back with --with slow', async () => {
    const selection = await loadSelection();
    assert.ok(selection.skips.length > 0);
    const slow = '[sig-node] Pod InPlace Resize Container [Slow] should resize [NodeConformance]';
    const skipped = classify(selection, slow);
    assert.equal(skipped.kind, 'skip');
    assert.match(skipped.kind === 'skip' ? skipped.reason : '', /slow/);
    assert.equal(classify(await loadSelection(undefined, ['slow']), slow).kind, 'run');
  });

  test('node-facing specs run; other [Conformance] specs are out of scope', async () => {
    const selection = await loadSelection();
    assert.deepEqual(
      classify(selection, '[sig-node] Pods should get a host IP [Conformance] [NodeConformance]'),
      {
        kind: 'run',
      },
    );
    assert.deepEqual(
      classify(selection, '[sig-apps] Deployment should run the lifecycle [Conformance]'),
      {
        kind: 'out-of-scope',
      },
    );
    assert.equal(classify(selection, '[sig-node] Foo [Serial] [NodeConformance]').kind, 'skip');
  });

  test('a skip entry without a reason is refused, naming the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-skips-'));
    try {
      const file = join(dir, 'skips.yaml');
      await writeFile(file, "focus: 'x'\nscope: ['x']\nskips:\n  - pattern: 'y'\n");
      await assert.rejects(
        loadSelection(file),
        new RegExp(`${escapeRegExp(file)}: skips\\[0\\] needs a pattern and a reason`),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('the subset lists distinct specs, none of them skipped', async () => {
    const selection = await loadSelection();
    const subset = await loadSubset();
    assert.equal(new Set(subset).size, subset.length);
    for (const name of subset) assert.equal(classify(selection, name).kind, 'run', name);
  });
});

describe('conformance report', () => {
  const result = (outcome: SpecResult['outcome'], message?: string): SpecResult => ({
    outcome,
    seconds: 1,
    ...(message !== undefined && { message }),
  });

  test('a spec failing for both agents is environmental; one failing for berth alone is not', () => {
    const rows = buildRows([{ name: 'a' }, { name: 'b' }, { name: 'c', skipReason: 'because' }], {
      berth: new Map([
        ['a', result('failed', 'boom')],
        ['b', result('failed', 'bang')],
      ]),
      upstream: new Map([
        ['a', result('failed', 'boom')],
        ['b', result('passed')],
      ]),
    });
    assert.deepEqual(
      rows.map((r) => r.environmental),
      [true, false, false],
    );
    assert.equal(rows[2]?.results['berth']?.message, 'because');
    assert.deepEqual(counts(rows, 'berth'), {
      selected: 3,
      passed: 0,
      failed: 2,
      skipped: 1,
      notRun: 0,
    });
    const md = summaryMarkdown({
      date: 'd',
      kubernetesVersion: 'v',
      command: 'c',
      agents: ['berth', 'upstream'],
      selected: 3,
      outOfScope: 0,
      rows,
      notRun: {},
    });
    assert.match(md, /\*\*a\*\* — fails on berth and upstream \(environmental/);
    assert.match(md, /berth \(\?\): bang/);
  });
});
