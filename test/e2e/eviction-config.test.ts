/**
 * A bad eviction threshold in the config is refused at start (issue #28): berth exits
 * non-zero and names the field, as upstream's kubelet refuses its config. No cluster:
 * berth never gets as far as the runtime or the API server.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BERTH_LAUNCHER } from '../harness/berth-node.ts';

interface Exit {
  readonly code: number | null;
  readonly output: string;
}

describe('eviction thresholds refused at start', () => {
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-eviction-config-'));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function startWith(name: string, lines: readonly string[]): Promise<Exit> {
    const config = join(dir, `${name}.yaml`);
    await writeFile(
      config,
      [
        'apiVersion: kubelet.config.k8s.io/v1beta1',
        'kind: KubeletConfiguration',
        'failSwapOn: false',
        ...lines,
        '',
      ].join('\n'),
    );
    return new Promise((resolve) => {
      execFile(
        BERTH_LAUNCHER,
        ['--config', config, '--root-dir', join(dir, `${name}-root`)],
        { timeout: 60_000 },
        (err, stdout, stderr) => {
          const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
          resolve({ code, output: `${stdout}${stderr}` });
        },
      );
    });
  }

  const cases: readonly {
    readonly name: string;
    readonly lines: readonly string[];
    readonly message: RegExp;
  }[] = [
    {
      name: 'unknown-signal',
      lines: ['evictionHard:', '  memory.availabel: "100Mi"'],
      message:
        /field "evictionHard\[memory\.availabel\]": unknown eviction signal "memory\.availabel"/,
    },
    {
      name: 'negative',
      lines: ['evictionHard:', '  pid.available: "-5"'],
      message:
        /evictionHard\[pid\.available\]: eviction threshold pid\.available must be positive: -5/,
    },
    {
      name: 'over-100-percent',
      lines: [
        'evictionSoft:',
        '  nodefs.available: "120%"',
        'evictionSoftGracePeriod:',
        '  nodefs.available: 1m',
      ],
      message:
        /evictionSoft\[nodefs\.available\]: eviction percentage threshold nodefs\.available must be <= 100%: 120%/,
    },
    {
      name: 'not-a-quantity',
      lines: ['evictionMinimumReclaim:', '  imagefs.available: "lots"'],
      message: /field "evictionMinimumReclaim\[imagefs\.available\]": invalid threshold "lots"/,
    },
    {
      name: 'soft-without-grace',
      lines: ['evictionSoft:', '  memory.available: "1Gi"'],
      message: /field "evictionSoftGracePeriod\[memory\.available\]": a grace period must be set/,
    },
  ];

  for (const c of cases) {
    test(`${c.name}: berth exits non-zero naming the field`, async () => {
      const exit = await startWith(c.name, c.lines);
      assert.notEqual(exit.code, 0, `berth exited ${String(exit.code)}: ${exit.output}`);
      assert.notEqual(exit.code, null, `berth did not exit by itself: ${exit.output}`);
      assert.match(exit.output, c.message);
    });
  }
});
