import assert from 'node:assert/strict';
import { test } from 'node:test';
import { envFileValue } from './env-file.ts';

const FILE = [
  '# a comment',
  '',
  "  A='one'",
  "B='two' # trailing comment",
  "MULTI='line1",
  "line2'",
  "SPACED= 'ignored'",
  "EMPTY=''",
  '',
].join('\n');

test('values in single quotes, comments and blank lines skipped, multi-line values', () => {
  assert.equal(envFileValue(FILE, 'A'), 'one');
  assert.equal(envFileValue(FILE, 'B'), 'two');
  assert.equal(envFileValue(FILE, 'MULTI'), 'line1\nline2');
});

test('an absent key, an empty value and a space after = all read as empty (upstream)', () => {
  assert.equal(envFileValue(FILE, 'NOPE'), '');
  assert.equal(envFileValue(FILE, 'EMPTY'), '');
  assert.equal(envFileValue(FILE, 'SPACED'), '');
});

test('malformed files name the line', () => {
  assert.throws(
    () => envFileValue('A=unquoted\n', 'A'),
    /line 1: value must be enclosed in single quotes/,
  );
  assert.throws(() => envFileValue("X='ok'\nnoequals\n", 'A'), /line 2: missing '='/);
  assert.throws(() => envFileValue("A ='x'\n", 'A'), /line 1: whitespace before '='/);
  assert.throws(() => envFileValue("='x'\n", 'A'), /line 1: empty variable name/);
  assert.throws(
    () => envFileValue("A='x' junk\n", 'A'),
    /line 1: unexpected content after closing quote/,
  );
  assert.throws(
    () => envFileValue("A='never closed\n", 'A'),
    /starting at line 1: unclosed single quote/,
  );
});
