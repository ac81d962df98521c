/**
 * CSI version negotiation as upstream's utilversion.HighestSupportedVersion: of the
 * versions a driver lists, the highest whose major is at most 1, and that one must be
 * a 1.x (CSI 0.x is no longer supported, 2.x need not be compatible). Versions are
 * "generic": two or more dot-separated numbers, an optional leading "v", anything after
 * the numbers ignored.
 */

/** A parsed generic version: its numeric components. */
export type GenericVersion = readonly number[];

const VERSION = /^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)*$/;

/** Parses "1.2", "v1.10.0", "1.0.0-rc1"; throws on anything else. */
export function parseGenericVersion(text: string): GenericVersion {
  const numbers = VERSION.exec(text)?.[1];
  if (numbers === undefined) throw new Error(`could not parse "${text}" as version`);
  const parts = numbers.split('.');
  if (parts.length < 2) throw new Error(`illegal version string "${text}"`);
  if (parts[0] !== undefined && parts[0].startsWith('0') && parts[0] !== '0') {
    throw new Error(`illegal zero-prefixed version component "${parts[0]}" in "${text}"`);
  }
  return parts.map(Number);
}

/** <0, 0, >0 as a is lower than, equal to or higher than b (missing components are 0). */
export function compareVersions(a: GenericVersion, b: GenericVersion): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export function formatVersion(v: GenericVersion): string {
  return v.join('.');
}

/** The highest supported 1.x version; throws with upstream's reasons when there is none. */
export function highestSupportedVersion(versions: readonly string[]): GenericVersion {
  if (versions.length === 0) throw new Error('empty array for supported versions');
  let highest: GenericVersion | undefined;
  let lastError: unknown;
  for (const text of versions) {
    let v: GenericVersion;
    try {
      v = parseGenericVersion(text);
    } catch (err) {
      lastError = err;
      continue;
    }
    if ((v[0] ?? 0) > 1) continue;
    if (highest === undefined || compareVersions(highest, v) < 0) highest = v;
  }
  if (highest === undefined) {
    const why = lastError instanceof Error ? lastError.message : '<nil>';
    throw new Error(
      `could not find a highest supported version from versions ([${versions.join(' ')}]) reported: ${why}`,
    );
  }
  if (highest[0] !== 1) {
    throw new Error(
      `highest supported version reported is ${formatVersion(highest)}, must be v1.x`,
    );
  }
  return highest;
}
