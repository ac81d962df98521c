/**
 * Decoding a watch response: the apiserver writes one JSON event per line and flushes
 * after each, so a chunk may hold part of an event, several events, or end inside a
 * multi-byte character.
 */
import { StringDecoder } from 'node:string_decoder';
import { BerthError } from '../util/errors.ts';
import { KubeApiError, type WatchEvent } from './types.ts';

/** One event larger than this is a broken stream, not a watch event (etcd caps objects at 1.5 MiB). */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

/** Yields each non-empty line of `chunks` (without the newline), the last one even if unterminated. */
export async function* lines(
  chunks: AsyncIterable<Uint8Array | string>,
  maxLineBytes = MAX_LINE_BYTES,
): AsyncGenerator<string, void, undefined> {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  for await (const chunk of chunks) {
    pending += typeof chunk === 'string' ? chunk : decoder.write(chunk);
    let start = 0;
    for (;;) {
      const end = pending.indexOf('\n', start);
      if (end < 0) break;
      const line = pending.slice(start, end).trim();
      start = end + 1;
      if (line !== '') yield line;
    }
    pending = pending.slice(start);
    if (pending.length > maxLineBytes) {
      throw new BerthError(
        'BERTH_KUBE_LINE_TOO_LONG',
        `Cannot read a watch event as it exceeds ${maxLineBytes} bytes without a newline`,
      );
    }
  }
  const rest = (pending + decoder.end()).trim();
  if (rest !== '') yield rest;
}

const EVENT_TYPES: ReadonlySet<string> = new Set([
  'ADDED',
  'MODIFIED',
  'DELETED',
  'BOOKMARK',
  'ERROR',
]);

/** Decodes one watch line; a malformed one is a transport-level error. */
export function parseEvent<T>(line: string, context = 'watch'): WatchEvent<T> {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    throw new KubeApiError(
      0,
      'Unknown',
      `${context}: cannot decode watch event (${err instanceof Error ? err.message : String(err)}): ${line.slice(0, 200)}`,
      { cause: err },
    );
  }
  const type = (value as { type?: unknown } | null)?.type;
  if (typeof type !== 'string' || !EVENT_TYPES.has(type)) {
    throw new KubeApiError(
      0,
      'Unknown',
      `${context}: watch event has unknown type ${JSON.stringify(type)}: ${line.slice(0, 200)}`,
    );
  }
  return value as WatchEvent<T>;
}
