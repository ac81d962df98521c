/**
 * Compares two V8 heap snapshots (InspectorSession.writeHeapSnapshot): live objects
 * counted by constructor (or by kind for strings, closures, arrays, ...), and the
 * constructors whose count or self size grew most from the first to the second. What
 * grows by about the number of pods that came and went is the leak to look for.
 *
 *   node test/soak/heap-diff.ts before.heapsnapshot after.heapsnapshot [top]
 */
import { readFile } from 'node:fs/promises';

interface SnapshotFile {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: readonly string[];
      readonly node_types: readonly [readonly string[], ...unknown[]];
    };
  };
  readonly nodes: readonly number[];
  readonly strings: readonly string[];
}

export interface ConstructorCount {
  readonly count: number;
  readonly selfSize: number;
}

/** Live objects of a snapshot by constructor name (objects) or by type (the rest). */
export async function countByConstructor(file: string): Promise<Map<string, ConstructorCount>> {
  const snap = JSON.parse(await readFile(file, 'utf8')) as SnapshotFile;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const out = new Map<string, ConstructorCount>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt] ?? 0] ?? '?';
    const name = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '?';
    const key = type === 'object' || type === 'native' ? name : `(${type})`;
    const prev = out.get(key) ?? { count: 0, selfSize: 0 };
    out.set(key, {
      count: prev.count + 1,
      selfSize: prev.selfSize + (snap.nodes[i + sizeAt] ?? 0),
    });
  }
  return out;
}

export interface ConstructorGrowth {
  readonly name: string;
  readonly before: number;
  readonly after: number;
  readonly bytesGrowth: number;
}

/** The `top` constructors whose self size grew most. */
export function growth(
  before: ReadonlyMap<string, ConstructorCount>,
  after: ReadonlyMap<string, ConstructorCount>,
  top: number,
): ConstructorGrowth[] {
  return [...after]
    .map(([name, a]) => {
      const b = before.get(name) ?? { count: 0, selfSize: 0 };
      return { name, before: b.count, after: a.count, bytesGrowth: a.selfSize - b.selfSize };
    })
    .sort((x, y) => y.bytesGrowth - x.bytesGrowth)
    .slice(0, top);
}

if (import.meta.main) {
  const [a, b, top] = process.argv.slice(2);
  if (a === undefined || b === undefined) {
    console.error('usage: heap-diff.ts before.heapsnapshot after.heapsnapshot [top]');
    process.exit(2);
  }
  const rows = growth(await countByConstructor(a), await countByConstructor(b), Number(top ?? 30));
  for (const r of rows)
    console.log(
      `${String(r.bytesGrowth).padStart(10)} B  ${String(r.before).padStart(7)} -> ${String(r.after).padEnd(7)} ${r.name}`,
    );
}
