import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  ALLOCATED_PODS_STATE_FILE,
  checkpointChecksum,
  decodeCheckpoint,
  encodeCheckpoint,
} from './checkpoint.ts';
import { resourceStateContract } from './contract.ts';
import { CheckpointResourceState, MemoryResourceState } from './state.ts';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-alloc-'));
  dirs.push(d);
  return d;
}

resourceStateContract('memory (the fake)', () => Promise.resolve(new MemoryResourceState()));
resourceStateContract('checkpoint file', async () =>
  CheckpointResourceState.open(await tempDir(), ALLOCATED_PODS_STATE_FILE),
);

describe('allocation checkpoint format', () => {
  test("the checksum is upstream's (value computed with go-spew and hash/fnv)", () => {
    const data =
      '{"entries":{"u1":{"ContainerResources":{"c":{"limits":{"cpu":"100m"}}},"PodLevelResources":null,"EmptyDirVolumeLimits":null}}}';
    assert.equal(checkpointChecksum(data), 3684751342);
  });

  test('encodes as Go does: keys sorted, fields in order, an empty state as {}', () => {
    const text = encodeCheckpoint(
      new Map([
        [
          'u1',
          {
            containerResources: {
              z: { requests: { memory: '1Gi', cpu: '1' }, limits: { cpu: '2' } },
              a: {},
            },
          },
        ],
      ]),
    );
    const file = JSON.parse(text) as { data: string; checksum: number };
    assert.equal(
      file.data,
      '{"entries":{"u1":{"ContainerResources":{"a":{},"z":{"limits":{"cpu":"2"},"requests":{"cpu":"1","memory":"1Gi"}}},"PodLevelResources":null,"EmptyDirVolumeLimits":null}}}',
    );
    assert.equal(file.checksum, checkpointChecksum(file.data));
    assert.equal((JSON.parse(encodeCheckpoint(new Map())) as { data: string }).data, '{}');
  });

  test('a file upstream v1.37.2 wrote (state.NewStateCheckpoint) is read and re-encoded byte for byte', () => {
    const goWritten =
      '{"data":"{\\"entries\\":{\\"uid-go\\":{\\"ContainerResources\\":{\\"c\\":{\\"limits\\":{\\"cpu\\":\\"250m\\",\\"memory\\":\\"64Mi\\"}}},\\"PodLevelResources\\":null,\\"EmptyDirVolumeLimits\\":null}}}","checksum":1288406174}';
    const entries = decodeCheckpoint(goWritten);
    assert.deepEqual(entries.get('uid-go'), {
      containerResources: { c: { limits: { cpu: '250m', memory: '64Mi' } } },
    });
    assert.equal(encodeCheckpoint(entries), goWritten);
  });

  test('a corrupted file is refused, a valid one round-trips', () => {
    const entries = new Map([
      [
        'u1',
        {
          containerResources: { c: { limits: { cpu: '1' } } },
          podLevelResources: { requests: { cpu: '1' } },
        },
      ],
    ]);
    const text = encodeCheckpoint(entries);
    assert.deepEqual(decodeCheckpoint(text), entries);
    assert.throws(() => decodeCheckpoint(text.replace('\\"cpu\\":\\"1\\"', '\\"cpu\\":\\"2\\"')), {
      code: 'BERTH_ALLOCATION',
      message: /checksum mismatch/,
    });
    assert.throws(() => decodeCheckpoint('not json'), { code: 'BERTH_ALLOCATION' });
  });
});

describe('CheckpointResourceState', () => {
  test('what was set is restored by the next open (a restarted berth)', async () => {
    const dir = await tempDir();
    const s = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
    await s.set('u1', {
      containerResources: { c: { requests: { cpu: '500m' }, limits: { cpu: '500m' } } },
    });
    await s.setContainer('u1', 'c', { requests: { cpu: '1' }, limits: { cpu: '1' } });
    const again = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
    assert.deepEqual(again.get('u1'), {
      containerResources: { c: { limits: { cpu: '1' }, requests: { cpu: '1' } } },
    });
  });

  test('a removal alone is not written; the next change writes it', async () => {
    const dir = await tempDir();
    const s = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
    await s.set('u1', { containerResources: {} });
    s.remove('u1');
    let again = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
    assert.deepEqual(again.uids(), ['u1']);
    await s.set('u2', { containerResources: {} });
    again = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
    assert.deepEqual(again.uids(), ['u2']);
    const text = await readFile(join(dir, ALLOCATED_PODS_STATE_FILE), 'utf8');
    assert.match(text, /^\{"data":".*","checksum":\d+\}$/);
  });

  test('a failed write leaves no temporary file behind', async () => {
    const dir = await tempDir();
    const s = await CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE);
    await s.set('u1', { containerResources: {} });
    // The rename over a non-empty directory fails, as a write on a full disk does.
    await rm(join(dir, ALLOCATED_PODS_STATE_FILE));
    await mkdir(join(dir, ALLOCATED_PODS_STATE_FILE, 'blocker'), { recursive: true });
    await assert.rejects(s.set('u2', { containerResources: {} }), { code: 'BERTH_ALLOCATION' });
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.includes('.tmp')),
      [],
      'no temporary file left',
    );
  });

  test("a corrupt file stops the start with upstream's advice", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, ALLOCATED_PODS_STATE_FILE), '{"data":"{}","checksum":1}');
    await assert.rejects(CheckpointResourceState.open(dir, ALLOCATED_PODS_STATE_FILE), {
      code: 'BERTH_ALLOCATION',
      message: /please drain this node and delete pod resource information checkpoint file/,
    });
  });
});
