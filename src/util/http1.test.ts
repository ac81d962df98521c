/**
 * The raw HTTP/1.1 pieces: response heads (complete, partial, malformed, oversized),
 * header checks, and the chunked decoder fed byte by byte and in one piece.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  badHeader,
  ChunkedBodyError,
  ChunkedDecoder,
  forwardedRequestHead,
  headerValue,
  MAX_HEAD_BYTES,
  parseResponseHead,
  ResponseHeadError,
} from './http1.ts';

describe('HTTP/1.1 heads', () => {
  test('a response head is parsed once complete, the bytes after it kept', () => {
    const wire = Buffer.concat([
      Buffer.from('HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n\r\n'),
      Buffer.from([0x80, 0x03]),
    ]);
    assert.equal(parseResponseHead(wire.subarray(0, 20)), undefined);
    const head = parseResponseHead(wire);
    assert.ok(head !== undefined);
    assert.equal(head.status, 101);
    assert.equal(head.statusText, 'Switching Protocols');
    assert.deepEqual(head.rawHeaders, ['Upgrade', 'SPDY/3.1']);
    assert.equal(headerValue(head.rawHeaders, 'upgrade'), 'SPDY/3.1');
    assert.deepEqual([...head.rest], [0x80, 0x03]);
    assert.equal(head.bytes.length, wire.length - 2);
  });

  test('lines ending in a bare LF are read as Go and Node read them', () => {
    const head = parseResponseHead(Buffer.from('HTTP/1.1 200 OK\nContent-Length: 2\n\nok'));
    assert.ok(head !== undefined);
    assert.equal(head.statusText, 'OK');
    assert.deepEqual(head.rawHeaders, ['Content-Length', '2']);
    assert.equal(head.rest.toString(), 'ok');
    const mixed = parseResponseHead(Buffer.from('HTTP/1.1 204 No Content\r\nA: b\n\r\n'));
    assert.deepEqual(mixed?.rawHeaders, ['A', 'b']);
    assert.equal(mixed?.rest.length, 0);
  });

  test('malformed and oversized heads are errors', () => {
    assert.throws(() => parseResponseHead(Buffer.from('SSH-2.0\r\n\r\n')), ResponseHeadError);
    assert.throws(
      () => parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\nno colon\r\n\r\n')),
      ResponseHeadError,
    );
    assert.throws(
      () => parseResponseHead(Buffer.from(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}`)),
      ResponseHeadError,
    );
  });

  test('forwarded request heads drop credentials and hop headers', () => {
    const head = forwardedRequestHead('POST', '/exec/t', '127.0.0.1:1', [
      'Authorization',
      'Bearer x',
      'Host',
      'kubelet',
      'Upgrade',
      'SPDY/3.1',
    ]);
    assert.equal(head, 'POST /exec/t HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUpgrade: SPDY/3.1\r\n\r\n');
  });

  test('headers that would break the framing are refused', () => {
    assert.equal(badHeader('x-ok', 'fine value'), undefined);
    assert.match(badHeader('x-bad', 'a\r\nInjected: 1') ?? '', /invalid header field value/);
    assert.match(badHeader('bad name', 'v') ?? '', /invalid header field name/);
    assert.match(badHeader('x', 'nul\0') ?? '', /invalid header field value/);
  });
});

describe('chunked bodies', () => {
  const wire = Buffer.from('5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n');

  test('decoded in one piece and byte by byte alike', () => {
    const whole = new ChunkedDecoder();
    assert.equal(Buffer.concat(whole.push(wire)).toString(), 'hello, world');
    assert.equal(whole.done, true);
    const bytewise = new ChunkedDecoder();
    const parts: Buffer[] = [];
    for (let i = 0; i < wire.length && !bytewise.done; i++)
      parts.push(...bytewise.push(wire.subarray(i, i + 1)));
    assert.equal(Buffer.concat(parts).toString(), 'hello, world');
    assert.equal(bytewise.done, true);
  });

  test('bad sizes and missing chunk ends are errors', () => {
    assert.throws(() => new ChunkedDecoder().push(Buffer.from('zz\r\n')), ChunkedBodyError);
    assert.throws(() => new ChunkedDecoder().push(Buffer.from('2\r\nabXY')), ChunkedBodyError);
    assert.throws(() => new ChunkedDecoder().push(Buffer.from('1'.repeat(5000))), ChunkedBodyError);
  });
});
