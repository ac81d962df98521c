/**
 * The container spec hash written to the `io.kubernetes.container.hash` annotation.
 *
 * A running container whose recorded hash differs from the hash of its current spec is
 * killed and restarted, whatever the restart policy. The hash therefore covers exactly
 * the container fields that can change on a live pod *and* need a new container to take
 * effect:
 *
 * - `name` — identity (a different name is a different container anyway);
 * - `image` — the only other field of a regular or init container the API server lets
 *   a client change after creation.
 *
 * Everything else in a container spec is immutable through the API (a static pod's file
 * changes its UID, so it becomes a new pod), and `resources` are resized in place
 * rather than by restart. Hashing more fields would only add risk: a field defaulted
 * differently by a newer control plane would restart every container on the node.
 *
 * The value is bit-for-bit the one the upstream kubelet writes (v1.31 and later: FNV-32a
 * over Go's spew rendering of the JSON of `{image, name}`, printed as lower-case hex).
 * That is deliberate: a node that switches between the upstream kubelet and berth keeps
 * its containers, because both agree on every recorded hash.
 */
import type { Container } from 'kubernetes-types/core/v1.js';

const FNV32_OFFSET = 0x811c9dc5;
const FNV32_PRIME = 0x01000193;

/**
 * Hash of the restart-relevant fields of `container` (see the module comment), as
 * lower-case hexadecimal without leading zeros. Stable across object key order, since
 * only two named fields are read.
 */
export function hashContainer(container: Pick<Container, 'name' | 'image'>): string {
  // Go's encoding/json writes map keys sorted: "image" before "name".
  const json = `{"image":${goJsonString(container.image ?? '')},"name":${goJsonString(container.name)}}`;
  const bytes = new TextEncoder().encode(json);
  // The upstream kubelet hashes spew's `%#v` of the JSON byte slice, which renders as
  // `([]uint8)[123 34 ...]`: the type, then the bytes in decimal separated by spaces.
  const rendered = `([]uint8)[${bytes.join(' ')}]`;
  return fnv32a(new TextEncoder().encode(rendered)).toString(16);
}

/** Compares two recorded hashes numerically, so `08e45cbd0` equals `8e45cbd0`. */
export function sameContainerHash(a: string, b: string): boolean {
  const left = parseHexHash(a);
  return left !== undefined && left === parseHexHash(b);
}

/**
 * Parses a hash annotation value the way upstream does (unsigned 64-bit hex), returning
 * it normalised to lower case without leading zeros, or undefined when it is garbled.
 */
export function normalizeContainerHash(value: string | undefined): string | undefined {
  return parseHexHash(value)?.toString(16);
}

function parseHexHash(value: string | undefined): bigint | undefined {
  if (value === undefined || !/^[0-9a-fA-F]{1,16}$/.test(value)) return undefined;
  return BigInt(`0x${value}`);
}

/**
 * A JSON string literal as Go's encoding/json writes it. JSON.stringify already agrees
 * on control characters (Go >= 1.22 uses \b and \f too, and lower-case \u00xx); Go
 * additionally escapes the HTML characters <, > and & and the line and paragraph
 * separators, and replaces lone surrogates (invalid UTF-8 in Go) with U+FFFD.
 */
function goJsonString(value: string): string {
  return JSON.stringify(value.toWellFormed()).replace(/[<>&\u2028\u2029]/g, (ch) => {
    return `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

function fnv32a(bytes: Uint8Array): number {
  let hash = FNV32_OFFSET;
  for (const byte of bytes) {
    hash ^= byte;
    hash = Math.imul(hash, FNV32_PRIME) >>> 0;
  }
  return hash >>> 0;
}
