/**
 * The berth command refuses bad input at start with a message that names it, and
 * exits non-zero without touching anything.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

const NODE = new URL('../../node_modules/.bin/node', import.meta.url).pathname;
const MAIN = new URL('../../src/cmd/berth.ts', import.meta.url).pathname;

function berth(args: string[]): { status: number | null; stderr: string; stdout: string } {
  const r = spawnSync(NODE, [MAIN, ...args], { encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

describe('berth command line', () => {
  test('an unknown flag is rejected by name', () => {
    const r = berth(['--no-such-flag=1']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--no-such-flag/);
  });

  test('an invalid flag value is rejected by name', () => {
    const r = berth(['--max-pods=abc']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--max-pods/);
  });

  test('an unknown or mistyped config field is rejected with its name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-cli-'));
    try {
      const file = join(dir, 'config.yaml');
      writeFileSync(
        file,
        'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequncy: 1m\n',
      );
      const r = berth(['--config', file]);
      assert.equal(r.status, 2);
      assert.match(r.stderr, /syncFrequncy/);
      writeFileSync(
        file,
        'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: lots\n',
      );
      const typed = berth(['--config', file]);
      assert.equal(typed.status, 2);
      assert.match(typed.stderr, /maxPods/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--help prints the flags and exits 0', () => {
    const r = berth(['--help']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /--kubeconfig/);
    assert.match(r.stdout, /--container-runtime-endpoint/);
  });
});
