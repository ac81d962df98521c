import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { IdRanges } from './ranges.ts';
import { kubeletMappings } from './subid.ts';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function etc(files: Record<string, string>): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-subid-'));
  dirs.push(d);
  for (const [name, content] of Object.entries(files)) await writeFile(join(d, name), content);
  return d;
}

const PASSWD =
  'root:x:0:0:root:/root:/bin/bash\nkubelet:x:998:998::/var/lib/kubelet:/usr/sbin/nologin\n';

describe("the kubelet's IDs (upstream's getKubeletMappings)", () => {
  test('without a kubelet user: every ID from idsPerPod up', async () => {
    const d = await etc({ passwd: 'root:x:0:0:root:/root:/bin/bash\n' });
    assert.deepEqual(await kubeletMappings(65536, { etcDir: d }), {
      firstId: 65536,
      length: 2 ** 32 - 65536,
    });
    assert.deepEqual(await kubeletMappings(131072, { etcDir: d }), {
      firstId: 131072,
      length: 2 ** 32 - 131072,
    });
  });

  test("the kubelet user's one range, by name or by UID", async () => {
    const byName = await etc({
      passwd: PASSWD,
      subuid: 'alice:100000:65536\nkubelet:524288:7208960\n',
      subgid: 'kubelet:524288:7208960\n',
    });
    assert.deepEqual(await kubeletMappings(65536, { etcDir: byName }), {
      firstId: 524288,
      length: 7208960,
    });
    const byUid = await etc({
      passwd: PASSWD,
      subuid: '998:65536:65536\n',
      subgid: '998:65536:65536\n',
    });
    assert.deepEqual(await kubeletMappings(65536, { etcDir: byUid }), {
      firstId: 65536,
      length: 65536,
    });
  });

  test("upstream's errors: no range, uid and gid ranges differ, more than one range", async () => {
    const none = await etc({ passwd: PASSWD, subuid: '', subgid: '' });
    await assert.rejects(kubeletMappings(65536, { etcDir: none }), {
      code: 'BERTH_USERNS',
      message: /^error retrieving additional uids for user "kubelet"/,
    });
    const differ = await etc({
      passwd: PASSWD,
      subuid: 'kubelet:65536:65536\n',
      subgid: 'kubelet:131072:65536\n',
    });
    await assert.rejects(kubeletMappings(65536, { etcDir: differ }), {
      message: 'mismatched subuids and subgids for user "kubelet"',
    });
    const two = 'kubelet:65536:65536\nkubelet:196608:65536\n';
    const many = await etc({ passwd: PASSWD, subuid: two, subgid: two });
    await assert.rejects(kubeletMappings(65536, { etcDir: many }), {
      message:
        'error parsing line "0: kubelet 65536 65536\n1: kubelet 196608 65536": it must contain only one line',
    });
    const garbled = await etc({ passwd: PASSWD, subuid: 'kubelet:lots\n', subgid: '' });
    await assert.rejects(kubeletMappings(65536, { etcDir: garbled }), {
      message: 'error parsing line "kubelet:lots": not owner:start:count',
    });
  });
});

describe("the kubelet's IDs checked as upstream's MakeUserNsManager checks them", () => {
  const cases: [string, number, number, number, string][] = [
    [
      'idsPerPod',
      65536 + 1,
      65536,
      2 ** 20,
      'kubelet user namespace length 65537 is not a multiple of 65536',
    ],
    [
      'first ID',
      65536,
      100_000,
      2 ** 20,
      'kubelet user assigned ID 100000 is not a multiple of 65536',
    ],
    [
      'root range',
      65536,
      0,
      2 ** 20,
      'kubelet user assigned ID 0 must be greater or equal to 65536',
    ],
    [
      'length',
      65536,
      65536,
      100_000,
      'kubelet user assigned IDs length 100000 is not a multiple of 65536',
    ],
    [
      'maxPods',
      65536,
      65536,
      65536 * 109,
      'kubelet user assigned IDs are not enough to support 110 pods',
    ],
  ];
  for (const [what, ids, firstId, length, message] of cases)
    test(`refused: ${what}`, () => {
      assert.throws(() => IdRanges.create({ firstId, length }, ids, 110), {
        code: 'BERTH_USERNS',
        message,
      });
    });

  test('a range read back must be whole, aligned, inside and not taken', () => {
    const r = IdRanges.create({ firstId: 65536, length: 65536 * 2 }, 65536, 2, () => 0);
    r.record('a', 65536, 65536);
    r.record('a', 65536, 65536);
    assert.throws(
      () => {
        r.record('a', 131072, 65536);
      },
      {
        message: 'different user namespace range already used by pod "a"',
      },
    );
    assert.throws(
      () => {
        r.record('b', 65536, 65536);
      },
      {
        message: 'range picked for pod "b" already taken',
      },
    );
    assert.throws(
      () => {
        r.record('b', 65536 * 3, 65536);
      },
      { message: 'id 196608 is out of range' },
    );
    assert.throws(
      () => {
        r.record('b', 65537, 65536);
      },
      {
        message: 'wrong user namespace offset specified 65537',
      },
    );
    assert.equal(r.allocateOne('b'), 131072);
    assert.throws(() => r.allocateOne('c'), {
      message: 'could not find an empty slot to allocate a user namespace',
    });
  });
});
