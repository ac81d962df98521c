/**
 * SPDY/3.1 framing, only as much as a client of a CRI streaming server needs: berth
 * speaks it when it translates a WebSocket exec or attach (v5.channel.k8s.io) into the
 * SPDY streams the runtime serves (ws-translate.ts), as upstream's kubelet does since
 * ExtendWebSocketsToKubelet.
 *
 * What is written: SYN_STREAM (one per stream the runtime expects), DATA (stdin and
 * resize, FIN for a half-close) and PING replies. What is read: DATA (stdout, stderr,
 * error), stream ends (FIN, RST_STREAM), PING; SYN_REPLY and the rest are skipped.
 *
 * Header blocks must be zlib data, one stream per connection and direction. Berth sends
 * only a handful of short blocks, so they go out as deflate "stored" (uncompressed)
 * blocks, each followed by a sync flush's empty block, in a zlib stream without a preset
 * dictionary, which every zlib reader accepts;
 * the runtime's blocks (compressed with SPDY's dictionary) are never decoded, as berth
 * needs nothing from its SYN_REPLY headers.
 */

const VERSION = 3;
export const FLAG_FIN = 0x01;

export const FrameType = {
  SYN_STREAM: 1,
  SYN_REPLY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  HEADERS: 8,
  WINDOW_UPDATE: 9,
} as const;

/** The largest frame payload SPDY's 24-bit length field allows. */
export const MAX_FRAME_PAYLOAD = 0xff_ff_ff;

export type SpdyFrame =
  | {
      readonly kind: 'data';
      readonly streamId: number;
      readonly fin: boolean;
      readonly data: Buffer;
    }
  | {
      readonly kind: 'control';
      readonly type: number;
      readonly flags: number;
      readonly payload: Buffer;
    };

export class SpdyProtocolError extends Error {
  override readonly name = 'SpdyProtocolError';
}

/** The client's side of the connection's header compression: stored deflate blocks. */
export class HeaderBlockWriter {
  #started = false;

  /**
   * The zlib bytes of one name/value block; names are lowercased, as SPDY requires.
   * Written into one buffer: every exec sends two to four of these, and a buffer per
   * length and string was a tenth of what berth allocated for an exec.
   */
  block(headers: readonly (readonly [string, string])[]): Buffer {
    const pairs = headers.map(([name, value]) => [name.toLowerCase(), value] as const);
    let raw = 4;
    for (const [name, value] of pairs)
      raw += 8 + Buffer.byteLength(name) + Buffer.byteLength(value);
    if (raw > 0xff_ff) throw new SpdyProtocolError(`Cannot send a header block of ${raw} bytes`);
    // The zlib header (deflate, no preset dictionary) opens the connection's first block.
    const head = this.#started ? 0 : 2;
    this.#started = true;
    const out = Buffer.allocUnsafe(head + 5 + raw + SYNC_FLUSH.length);
    if (head > 0) out.set([0x78, 0x01]);
    // Stored block: BFINAL 0, BTYPE 00, then LEN and its one's complement, little-endian.
    out[head] = 0;
    out.writeUInt16LE(raw, head + 1);
    out.writeUInt16LE(~raw & 0xff_ff, head + 3);
    let at = out.writeUInt32BE(pairs.length, head + 5);
    for (const [name, value] of pairs) {
      for (const text of [name, value]) {
        const n = out.write(text, at + 4);
        out.writeUInt32BE(n, at);
        at += 4 + n;
      }
    }
    // Then an empty stored block, which is what a sync flush ends with: Go's inflater
    // hands a stored block's bytes out only on reaching the next block, and without it
    // would read past this frame's block (and fail) to finish this one.
    SYNC_FLUSH.copy(out, at);
    return out;
  }
}

const SYNC_FLUSH = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);

function controlFrame(type: number, flags: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16BE(0x80_00 | VERSION, 0);
  head.writeUInt16BE(type, 2);
  head.writeUInt32BE(((flags & 0xff) << 24) | payload.length, 4);
  return Buffer.concat([head, payload]);
}

/** SYN_STREAM opening client stream `streamId` (odd) with `headers`. */
export function synStream(
  streamId: number,
  headers: readonly (readonly [string, string])[],
  writer: HeaderBlockWriter,
): Buffer {
  const block = writer.block(headers);
  const out = Buffer.allocUnsafe(18 + block.length);
  out.writeUInt16BE(0x80_00 | VERSION, 0);
  out.writeUInt16BE(FrameType.SYN_STREAM, 2);
  // Flags 0, then the length of what follows the frame head.
  out.writeUInt32BE(10 + block.length, 4);
  out.writeUInt32BE(streamId & 0x7f_ff_ff_ff, 8);
  // Associated-To-Stream-ID 0, priority 0, slot 0.
  out.fill(0, 12, 18);
  block.copy(out, 18);
  return out;
}

/** A DATA frame; FIN ends the client's side of the stream. */
export function dataFrame(streamId: number, data: Buffer, fin: boolean): Buffer {
  if (data.length > MAX_FRAME_PAYLOAD)
    throw new SpdyProtocolError(`Cannot send ${data.length} bytes in one SPDY frame`);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(streamId & 0x7f_ff_ff_ff, 0);
  head.writeUInt32BE(((fin ? FLAG_FIN : 0) << 24) | data.length, 4);
  return Buffer.concat([head, data]);
}

/** The answer to a PING: the same frame back. */
export function pingFrame(payload: Buffer): Buffer {
  return controlFrame(FrameType.PING, 0, payload);
}

/** The stream ID a control frame concerns (SYN_REPLY, RST_STREAM, HEADERS), else 0. */
export function controlStreamId(frame: SpdyFrame & { kind: 'control' }): number {
  if (frame.payload.length < 4) return 0;
  return frame.payload.readUInt32BE(0) & 0x7f_ff_ff_ff;
}

/** Splits the runtime's bytes into frames, whatever the chunking. */
export class FrameReader {
  #pending: Buffer = Buffer.alloc(0);

  /** Every frame completed by `chunk`; a partial one waits for more bytes. */
  push(chunk: Buffer): SpdyFrame[] {
    const buf = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const frames: SpdyFrame[] = [];
    let at = 0;
    while (buf.length - at >= 8) {
      const word = buf.readUInt32BE(at + 4);
      const length = word & 0xff_ff_ff;
      const flags = word >>> 24;
      if (buf.length - at < 8 + length) break;
      // Copied out: `chunk` may be a pooled read buffer the caller reuses.
      const body = Buffer.from(buf.subarray(at + 8, at + 8 + length));
      if ((buf[at] ?? 0) & 0x80) {
        const version = buf.readUInt16BE(at) & 0x7f_ff;
        if (version !== VERSION)
          throw new SpdyProtocolError(`Cannot read SPDY version ${version} frames`);
        frames.push({ kind: 'control', type: buf.readUInt16BE(at + 2), flags, payload: body });
      } else {
        const streamId = buf.readUInt32BE(at) & 0x7f_ff_ff_ff;
        frames.push({ kind: 'data', streamId, fin: (flags & FLAG_FIN) !== 0, data: body });
      }
      at += 8 + length;
    }
    this.#pending = Buffer.from(buf.subarray(at));
    return frames;
  }
}
