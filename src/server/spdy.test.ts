import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { constants, inflateSync } from 'node:zlib';
import {
  dataFrame,
  FrameReader,
  FrameType,
  HeaderBlockWriter,
  pingFrame,
  SpdyProtocolError,
  synStream,
} from './spdy.ts';
import { nameValues } from './spdy-testing.ts';

describe('SPDY framing', () => {
  it('header blocks are one zlib stream that any inflater reads block by block', () => {
    const writer = new HeaderBlockWriter();
    const first = synStream(1, [['streamType', 'error']], writer);
    const second = synStream(3, [['streamtype', 'stdout']], writer);
    assert.equal(first.readUInt16BE(0), 0x8003);
    assert.equal(first.readUInt16BE(2), FrameType.SYN_STREAM);
    assert.equal(first.readUInt32BE(4) & 0xffffff, first.length - 8);
    assert.equal(first.readUInt32BE(8), 1);
    assert.equal(second.readUInt32BE(8), 3);
    // The blocks follow the 10 bytes of stream IDs, priority and slot; only the first
    // carries the zlib header, as one stream continues across frames.
    const zlibBytes = Buffer.concat([first.subarray(18), second.subarray(18)]);
    const raw = inflateSync(zlibBytes, { finishFlush: constants.Z_SYNC_FLUSH });
    const firstRaw = inflateSync(first.subarray(18), { finishFlush: constants.Z_SYNC_FLUSH });
    assert.deepEqual(nameValues(firstRaw), [['streamtype', 'error']]);
    assert.deepEqual(nameValues(raw.subarray(firstRaw.length)), [['streamtype', 'stdout']]);
    // Each block ends as a sync flush does, so a reader has it whole at the frame's end.
    for (const frame of [first, second])
      assert.deepEqual([...frame.subarray(-5)], [0x00, 0x00, 0x00, 0xff, 0xff]);
  });

  it('reads frames whatever the chunking, data and control apart', () => {
    const bytes = Buffer.concat([
      dataFrame(3, Buffer.from('hello'), false),
      pingFrame(Buffer.from([0, 0, 0, 2])),
      dataFrame(1, Buffer.from('{"status":"Success"}'), true),
      dataFrame(5, Buffer.alloc(0), true),
    ]);
    for (const size of [1, 3, 7, bytes.length]) {
      const reader = new FrameReader();
      const frames = [];
      for (let at = 0; at < bytes.length; at += size)
        frames.push(...reader.push(bytes.subarray(at, at + size)));
      assert.deepEqual(
        frames.map((f) =>
          f.kind === 'data'
            ? ['data', f.streamId, f.fin, f.data.toString()]
            : ['control', f.type, f.payload.readUInt32BE(0)],
        ),
        [
          ['data', 3, false, 'hello'],
          ['control', FrameType.PING, 2],
          ['data', 1, true, '{"status":"Success"}'],
          ['data', 5, true, ''],
        ],
        `chunks of ${size}`,
      );
    }
  });

  it('keeps a frame read from a reused buffer intact', () => {
    const reader = new FrameReader();
    const chunk = dataFrame(1, Buffer.from('abc'), false);
    const [frame] = reader.push(chunk);
    chunk.fill(0);
    assert.equal(frame?.kind === 'data' && frame.data.toString(), 'abc');
  });

  it('refuses control frames of another SPDY version', () => {
    const frame = pingFrame(Buffer.from([0, 0, 0, 1]));
    frame.writeUInt16BE(0x8002, 0);
    assert.throws(() => new FrameReader().push(frame), SpdyProtocolError);
  });
});
