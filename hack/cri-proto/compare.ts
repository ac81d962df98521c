/**
 * Compares berth's CRI subset with upstream's api.proto, message by message and field
 * by field. Every RPC, message and enum in the subset must exist upstream with the
 * same shape; a message may not drop fields (that would silently lose data).
 */
import type {
  EnumDescriptor,
  FieldDescriptor,
  FileDescriptor,
  MessageDescriptor,
} from './descriptor.ts';

function fieldShape(f: FieldDescriptor): string {
  return `${f.number} ${f.label} ${f.type} ${f.typeName ?? ''}`;
}

function compareEnum(
  path: string,
  ours: EnumDescriptor,
  theirs: EnumDescriptor | undefined,
  out: string[],
): void {
  if (theirs === undefined) {
    out.push(`enum ${path} does not exist upstream`);
    return;
  }
  const want = new Map(theirs.value.map((v) => [v.name, v.number]));
  const have = new Map(ours.value.map((v) => [v.name, v.number]));
  for (const [name, number] of want) {
    if (have.get(name) !== number)
      out.push(
        `enum ${path}.${name}: upstream ${number}, ours ${String(have.get(name) ?? 'missing')}`,
      );
  }
  for (const name of have.keys())
    if (!want.has(name)) out.push(`enum ${path}.${name} does not exist upstream`);
}

function compareMessage(
  path: string,
  ours: MessageDescriptor,
  theirs: MessageDescriptor | undefined,
  out: string[],
): void {
  if (theirs === undefined) {
    out.push(`message ${path} does not exist upstream`);
    return;
  }
  const want = new Map((theirs.field ?? []).map((f) => [f.name, f]));
  const have = new Map((ours.field ?? []).map((f) => [f.name, f]));
  for (const [name, f] of want) {
    const mine = have.get(name);
    if (mine === undefined) out.push(`field ${path}.${name} (${f.number}) is missing from ours`);
    else if (fieldShape(mine) !== fieldShape(f))
      out.push(`field ${path}.${name}: upstream "${fieldShape(f)}", ours "${fieldShape(mine)}"`);
  }
  for (const name of have.keys())
    if (!want.has(name)) out.push(`field ${path}.${name} does not exist upstream`);
  const nested = new Map((theirs.nestedType ?? []).map((m) => [m.name, m]));
  for (const m of ours.nestedType ?? [])
    compareMessage(`${path}.${m.name}`, m, nested.get(m.name), out);
  const enums = new Map((theirs.enumType ?? []).map((e) => [e.name, e]));
  for (const e of ours.enumType ?? []) compareEnum(`${path}.${e.name}`, e, enums.get(e.name), out);
}

/** Every difference found, as one sentence each; empty when the subset matches. */
export function compareCriSubset(ours: FileDescriptor, upstream: FileDescriptor): string[] {
  const out: string[] = [];
  if (ours.package !== upstream.package)
    out.push(`package: upstream ${upstream.package}, ours ${ours.package}`);
  const services = new Map(upstream.service.map((s) => [s.name, s]));
  for (const service of ours.service) {
    const theirs = services.get(service.name);
    if (theirs === undefined) {
      out.push(`service ${service.name} does not exist upstream`);
      continue;
    }
    const methods = new Map(theirs.method.map((m) => [m.name, m]));
    for (const m of service.method) {
      const t = methods.get(m.name);
      const shape = (x: typeof m): string =>
        `${x.inputType} -> ${x.serverStreaming === true ? 'stream ' : ''}${x.outputType}`;
      if (t === undefined) out.push(`rpc ${service.name}.${m.name} does not exist upstream`);
      else if (shape(t) !== shape(m))
        out.push(`rpc ${service.name}.${m.name}: upstream ${shape(t)}, ours ${shape(m)}`);
    }
  }
  const messages = new Map(upstream.messageType.map((m) => [m.name, m]));
  for (const m of ours.messageType) compareMessage(m.name, m, messages.get(m.name), out);
  const enums = new Map((upstream.enumType ?? []).map((e) => [e.name, e]));
  for (const e of ours.enumType ?? []) compareEnum(e.name, e, enums.get(e.name), out);
  return out;
}
