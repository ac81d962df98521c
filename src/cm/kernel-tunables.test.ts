import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import {
  KERNEL_TUNABLES,
  kernelTunableProblems,
  kernelTunablesMessage,
} from './kernel-tunables.ts';

async function sysctls(values: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'berth-sysctl-'));
  for (const [flag, value] of Object.entries(values)) {
    await mkdir(dirname(join(root, flag)), { recursive: true });
    await writeFile(join(root, flag), `${value}\n`);
  }
  return root;
}

test('a node with every tunable as upstream wants it has no problem', async () => {
  const root = await sysctls(Object.fromEntries(KERNEL_TUNABLES.map(([f, v]) => [f, String(v)])));
  try {
    assert.deepEqual(await kernelTunableProblems(root), []);
  } finally {
    await rm(root, { recursive: true });
  }
});

test('each differing or unreadable tunable is named with upstream words, in order', async () => {
  const values = Object.fromEntries(KERNEL_TUNABLES.map(([f, v]) => [f, String(v)]));
  values['vm/overcommit_memory'] = '0';
  values['kernel/panic'] = '1';
  delete values['kernel/keys/root_maxbytes'];
  const root = await sysctls(values);
  try {
    const problems = await kernelTunableProblems(root);
    assert.equal(problems.length, 3);
    assert.equal(
      problems[0],
      'invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0',
    );
    assert.equal(
      problems[1],
      'invalid kernel flag: kernel/panic, expected value: 10, actual value: 1',
    );
    assert.match(problems[2] ?? '', /^open .*kernel\/keys\/root_maxbytes: ENOENT/);
    assert.equal(
      kernelTunablesMessage(problems.slice(0, 1)),
      'Failed to start ContainerManager: invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0',
    );
    assert.match(
      kernelTunablesMessage(problems),
      /^Failed to start ContainerManager: \[invalid .*, open .*\]$/,
    );
  } finally {
    await rm(root, { recursive: true });
  }
});
