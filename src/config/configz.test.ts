import assert from 'node:assert/strict';
import { test } from 'node:test';
import { goDuration } from './configz.ts';

test('durations print as Go does', () => {
  assert.equal(goDuration(0), '0s');
  assert.equal(goDuration(250), '250ms');
  assert.equal(goDuration(10_000), '10s');
  assert.equal(goDuration(60_000), '1m0s');
  assert.equal(goDuration(90_500), '1m30.5s');
  assert.equal(goDuration(4 * 3_600_000), '4h0m0s');
});
