import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CriLogParser,
  fixedTimestamp,
  recordContent,
  recordTimeMs,
  renderContent,
} from './cri-format.ts';

const TS = '2026-01-01T00:00:01.000000000Z';

test('lines that are not CRI records are skipped, as upstream skips them', () => {
  const p = new CriLogParser();
  const records = p.push(
    Buffer.from(
      `${TS} stdout F ok\n${TS} stdin F bad stream\n${TS} stdout F\nnot a record\n` +
        `${TS} stderr F \n${TS} stdout P tail`,
    ),
  );
  assert.deepEqual(
    records.map((r) => recordContent(r).toString()),
    ['ok', ''],
  );
  // Without its newline the last record is held back, and only given out on request.
  const last = p.incomplete();
  assert.equal(last === undefined ? undefined : recordContent(last).toString(), 'tail');
  assert.equal(last?.newline, false);
});

test('a line whose timestamp Go would not parse is skipped, as upstream skips it', () => {
  const lines = [
    `${TS} stdout F fixed`,
    '2026-01-01T01:00:00.5+01:00 stdout F offset',
    '2026-13-01T00:00:01.000000000Z stdout F month 13',
    '2026-01-01T24:00:01.000000000Z stdout F hour 24',
    '2026-01-01 00:00:01.000000000Z stdout F no T',
    'yesterday stdout F words',
    '2026-01-01T00:00:01.00000000xZ stdout F not a digit',
  ];
  const records = new CriLogParser().push(Buffer.from(`${lines.join('\n')}\n`));
  assert.deepEqual(
    records.map((r) => recordContent(r).toString()),
    ['fixed', 'offset'],
  );
});

test('a record ends an output line when full, or when it printed nothing', () => {
  const records = new CriLogParser().push(
    Buffer.from(`${TS} stdout P a\n${TS} stdout P \n${TS} stdout F b\n`),
  );
  assert.deepEqual(
    records.map((r) => [r.newline, r.endsLine]),
    [
      [false, false],
      [false, true],
      [true, true],
    ],
  );
  assert.equal(renderContent(records).toString(), 'ab\n');
});

test('timestamps: milliseconds for --since, nine digits for output', () => {
  const [a, b] = new CriLogParser().push(
    Buffer.from(`2026-01-01T00:00:01.25Z stdout F x\n${TS} stdout F y\n`),
  );
  assert.ok(a !== undefined && b !== undefined);
  assert.equal(recordTimeMs(a), Date.UTC(2026, 0, 1, 0, 0, 1, 250));
  assert.equal(fixedTimestamp(a), '2026-01-01T00:00:01.250000000Z');
  assert.equal(fixedTimestamp(b), undefined, 'already fixed: the stored bytes are used');
});
