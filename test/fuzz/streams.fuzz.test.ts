/**
 * Hostile bytes on berth's byte-stream parsers: CRI log files (whatever the runtime or a
 * container wrote), and SPDY frames from the runtime's streaming server. Properties:
 * no error but the typed one, the same records or frames however the bytes are chunked,
 * no more output than input, and each serializer's output parses back to what it wrote.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  CriLogParser,
  recordContent,
  recordTimestamp,
  renderContent,
  type LogRecord,
} from '../../src/logs/cri-format.ts';
import {
  dataFrame,
  FrameReader,
  FrameType,
  HeaderBlockWriter,
  pingFrame,
  SpdyProtocolError,
  synStream,
  type SpdyFrame,
} from '../../src/server/spdy.ts';
import { expectTyped, fuzz } from './run.ts';

/** Splits `bytes` at the given cut points (any order, any repeats). */
function chunked(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of at) {
    out.push(bytes.subarray(from, c));
    from = c;
  }
  out.push(bytes.subarray(from));
  return out;
}

const summary = (r: LogRecord) => [
  recordTimestamp(r),
  recordContent(r).toString('latin1'),
  r.newline,
  r.endsLine,
];

const timestamp = fc.oneof(
  fc
    .date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc.constantFrom('2026-01-01T00:00:00.123456789Z', '2026-01-01T01:00:00+01:00', 'x', ''),
);
/** One log line as a runtime writes it: `<ts> <stream> <tag> <content>`. */
const criLine = fc.record({
  ts: timestamp,
  stream: fc.constantFrom('stdout', 'stderr'),
  tag: fc.constantFrom('F', 'P', 'F:x', 'P:y'),
  content: fc.uint8Array({ maxLength: 60 }).map((a) => Buffer.from(a.filter((b) => b !== 0x0a))),
});
/** Log file bytes: well-formed lines, mangled lines and noise. */
const logBytes = fc.oneof(
  fc
    .array(criLine, { maxLength: 12 })
    .map((lines) =>
      Buffer.concat(
        lines.map((l) =>
          Buffer.concat([
            Buffer.from(`${l.ts} ${l.stream} ${l.tag} `),
            l.content,
            Buffer.from('\n'),
          ]),
        ),
      ),
    ),
  fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)),
  fc
    .array(
      fc.constantFrom(' ', '\n', 'stdout', 'stderr', 'P', 'F', ':', 'x', '2026-01-01T00:00:00Z'),
      {
        maxLength: 60,
      },
    )
    .map((parts) => Buffer.from(parts.join(''))),
);

describe('fuzz: CRI log lines', () => {
  test('any bytes, any chunking: the same records, no more content than input', (t) => {
    fuzz(
      t,
      fc.property(logBytes, fc.array(fc.nat(), { maxLength: 6 }), (bytes, cuts) => {
        const whole = new CriLogParser();
        const all =
          expectTyped(
            () => whole.push(bytes),
            () => false,
          ) ?? [];
        const parts = new CriLogParser();
        const pieces = chunked(bytes, cuts).flatMap((c) => parts.push(Buffer.from(c)));
        assert.deepEqual(pieces.map(summary), all.map(summary));
        const rest = (p: CriLogParser) => {
          const r = p.incomplete();
          return r === undefined ? undefined : summary(r);
        };
        assert.deepEqual(rest(parts), rest(whole));
        assert.ok(renderContent(all).length <= bytes.length + all.length);
      }),
      500,
    );
  });

  test('a written line parses back to its timestamp, partial tag and content', (t) => {
    fuzz(
      t,
      fc.property(fc.array(criLine, { minLength: 1, maxLength: 8 }), (lines) => {
        const file = Buffer.concat(
          lines.map((l) =>
            Buffer.concat([
              Buffer.from(`${l.ts} ${l.stream} ${l.tag} `),
              l.content,
              Buffer.from('\n'),
            ]),
          ),
        );
        const records = new CriLogParser().push(file);
        // A line whose timestamp does not parse is skipped, as upstream's reader does.
        const kept = lines.filter((l) => !Number.isNaN(Date.parse(l.ts)));
        assert.deepEqual(
          records.map((r) => [recordTimestamp(r), recordContent(r).toString('latin1'), r.newline]),
          kept.map((l) => [l.ts, l.content.toString('latin1'), !l.tag.startsWith('P')]),
        );
      }),
      500,
    );
  });
});

const isSpdyError = (err: unknown): boolean => err instanceof SpdyProtocolError;

/** Frames berth writes or reads, as bytes. */
const frame = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 1, max: 0x7fff_ffff }),
      fc.uint8Array({ maxLength: 300 }),
      fc.boolean(),
    )
    .map(([id, data, fin]) => ({ bytes: dataFrame(id, Buffer.from(data), fin), id, data, fin })),
  fc
    .uint8Array({ minLength: 8, maxLength: 8 })
    .map((p) => ({ bytes: pingFrame(Buffer.from(p)), id: 0, data: p, fin: false })),
);
const spdyBytes = fc.oneof(
  fc.array(frame, { maxLength: 8 }).map((fs) => Buffer.concat(fs.map((f) => f.bytes))),
  fc.uint8Array({ maxLength: 400 }).map((a) => Buffer.from(a)),
  // Valid frames with bytes flipped: bad versions, huge lengths, odd types.
  fc
    .tuple(
      fc.array(frame, { minLength: 1, maxLength: 4 }),
      fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 4 }),
    )
    .map(([fs, flips]) => {
      const b = Buffer.concat(fs.map((f) => f.bytes));
      for (const [at, v] of flips) b[at % b.length] = v;
      return b;
    }),
);

const frameSummary = (f: SpdyFrame) =>
  f.kind === 'data'
    ? ['data', f.streamId, f.fin, f.data.toString('hex')]
    : ['control', f.type, f.flags, f.payload.toString('hex')];

describe('fuzz: SPDY frames from the runtime', () => {
  test('any bytes, any chunking: the same frames or a SpdyProtocolError, bounded', (t) => {
    fuzz(
      t,
      fc.property(spdyBytes, fc.array(fc.nat(), { maxLength: 6 }), (bytes, cuts) => {
        const whole = expectTyped(() => new FrameReader().push(bytes), isSpdyError);
        const reader = new FrameReader();
        const pieces = expectTyped(
          () => chunked(bytes, cuts).flatMap((c) => reader.push(Buffer.from(c))),
          isSpdyError,
        );
        if (whole === undefined) return;
        // Chunked, the frames before the bad one may have come out; none differ.
        assert.deepEqual(pieces?.map(frameSummary), whole.map(frameSummary));
        const payload = whole.reduce(
          (n, f) => n + (f.kind === 'data' ? f.data.length : f.payload.length),
          0,
        );
        assert.ok(payload <= bytes.length);
      }),
      500,
    );
  });

  test('data, ping and SYN_STREAM frames read back as written', (t) => {
    fuzz(
      t,
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 6 }),
        fc.array(fc.tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 40 })), {
          maxLength: 3,
        }),
        (frames, headers) => {
          const syn = synStream(1, headers, new HeaderBlockWriter());
          const read = new FrameReader().push(Buffer.concat([syn, ...frames.map((f) => f.bytes)]));
          assert.equal(read.length, frames.length + 1);
          const [first, ...rest] = read;
          assert.ok(first?.kind === 'control' && first.type === FrameType.SYN_STREAM);
          assert.equal(first.payload.readUInt32BE(0), 1);
          for (const [i, f] of rest.entries()) {
            const want = frames[i];
            assert.ok(want !== undefined);
            if (f.kind === 'data') {
              assert.deepEqual(
                [f.streamId, f.fin, f.data],
                [want.id, want.fin, Buffer.from(want.data)],
              );
            } else {
              assert.equal(f.type, FrameType.PING);
              assert.deepEqual(f.payload, Buffer.from(want.data));
            }
          }
        },
      ),
      500,
    );
  });
});
