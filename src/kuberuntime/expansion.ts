/**
 * `$(VAR)` expansion with upstream's semantics (third_party/forked/golang/expansion):
 * `$(NAME)` is replaced from the mapping, `$$` is an escaped `$`, an unknown `$(NAME)`
 * stays as written, an unterminated `$(` and a `$` before any other character are
 * copied unchanged. Used for env values, command, args and subPathExpr.
 *
 * Expansion is one pass: a replacement is never expanded again, so `A=$(A)` or a
 * loop between variables terminates with the text as written.
 */

/** Looks a name up; undefined means "unknown" (the reference is kept as written). */
export type ExpansionMapping = (name: string) => string | undefined;

/** A mapping over several maps, the first that has the name winning (MappingFuncFor). */
export function mappingFor(...contexts: ReadonlyMap<string, string>[]): ExpansionMapping {
  return (name) => {
    for (const vars of contexts) {
      const value = vars.get(name);
      if (value !== undefined) return value;
    }
    return undefined;
  };
}

/** Expands `input` against `mapping` (see the top of this file). Linear in the input. */
export function expand(input: string, mapping: ExpansionMapping): string {
  let first = input.indexOf('$');
  if (first === -1) return input;
  const parts: string[] = [];
  let checkpoint = 0;
  // The next ')' at or after a position, cached: upstream rescans for every `$(`,
  // which is quadratic for a value made of many unterminated `$(`.
  let closer = -2;
  for (let cursor = first; cursor < input.length - 1; cursor = first) {
    parts.push(input.slice(checkpoint, cursor));
    const next = input[cursor + 1];
    if (next === '$') {
      parts.push('$');
      checkpoint = cursor + 2;
    } else if (next === '(') {
      if (closer !== -1 && closer < cursor + 2) closer = input.indexOf(')', cursor + 2);
      if (closer === -1) {
        // Unterminated: `$(` is copied and scanning goes on after it.
        parts.push('$(');
        checkpoint = cursor + 2;
      } else {
        const name = input.slice(cursor + 2, closer);
        parts.push(mapping(name) ?? `$(${name})`);
        checkpoint = closer + 1;
      }
    } else {
      // `$` followed by anything else: both characters are kept.
      parts.push('$');
      checkpoint = cursor + 1;
    }
    first = input.indexOf('$', checkpoint);
    if (first === -1) break;
  }
  parts.push(input.slice(checkpoint));
  return parts.join('');
}
