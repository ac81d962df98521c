/** Test helper: decodes a raw (inflated) SPDY/3 name/value header block. */
export function nameValues(raw: Buffer): [string, string][] {
  const out: [string, string][] = [];
  let at = 4;
  for (let i = 0; i < raw.readUInt32BE(0); i++) {
    const n = raw.readUInt32BE(at);
    const name = raw.toString('utf8', at + 4, at + 4 + n);
    at += 4 + n;
    const v = raw.readUInt32BE(at);
    out.push([name, raw.toString('utf8', at + 4, at + 4 + v)]);
    at += 4 + v;
  }
  return out;
}
