import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hugepageLimits, pageSizeName } from './hugepages.ts';

describe('hugepage limits', () => {
  test('page sizes are named as the cgroup files name them', () => {
    assert.equal(pageSizeName(2 * 1024 ** 2), '2MB');
    assert.equal(pageSizeName(1024 ** 3), '1GB');
    assert.equal(pageSizeName(64 * 1024), '64KB');
  });

  test("every node size is limited, to 0 unless the container's limits name it", () => {
    const limits = hugepageLimits(
      {
        name: 'c',
        resources: {
          limits: { 'hugepages-2Mi': '4Mi', memory: '100Mi' },
          requests: { 'hugepages-2Mi': '4Mi' },
        },
      },
      ['hugepages-2Mi', 'hugepages-1Gi'],
    );
    assert.deepEqual(limits, [
      { pageSize: '2MB', limit: 4n * 1024n ** 2n },
      { pageSize: '1GB', limit: 0n },
    ]);
    assert.deepEqual(hugepageLimits({ name: 'c' }, []), []);
  });

  test('sizes that do not parse are left out', () => {
    assert.deepEqual(
      hugepageLimits({ name: 'c', resources: { limits: { 'hugepages-x': '1' } } }, [
        'hugepages-',
        'hugepages-2Mi',
      ]),
      [{ pageSize: '2MB', limit: 0n }],
    );
  });
});
