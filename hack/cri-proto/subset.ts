/**
 * Writes proto/runtime/v1/api.proto: the part of the CRI v1 API berth calls, with
 * exactly the upstream field names, numbers and types (the wire contract), taken from
 * k8s.io/cri-api at the pinned version. Only the schema is emitted; the file's prose is
 * ours. The drift test (test/unit/cri-proto-drift.test.ts) keeps it honest afterwards.
 *
 *   node hack/cri-proto/subset.ts
 */
import { writeFile } from 'node:fs/promises';
import {
  loadProto,
  pinnedVersions,
  upstreamCriProto,
  type EnumDescriptor,
  type FieldDescriptor,
  type FileDescriptor,
  type MessageDescriptor,
} from './descriptor.ts';

/** The RPCs berth uses. Streaming list variants and pod checkpoint/restore are left out. */
export const USED_RPCS: Readonly<Record<string, readonly string[]>> = {
  RuntimeService: [
    'Version',
    'RunPodSandbox',
    'StopPodSandbox',
    'RemovePodSandbox',
    'PodSandboxStatus',
    'ListPodSandbox',
    'CreateContainer',
    'StartContainer',
    'StopContainer',
    'RemoveContainer',
    'ListContainers',
    'ContainerStatus',
    'UpdateContainerResources',
    'ReopenContainerLog',
    'ExecSync',
    'Exec',
    'Attach',
    'PortForward',
    'ContainerStats',
    'ListContainerStats',
    'PodSandboxStats',
    'ListPodSandboxStats',
    'UpdateRuntimeConfig',
    'Status',
    'CheckpointContainer',
    'GetContainerEvents',
    'ListMetricDescriptors',
    'ListPodSandboxMetrics',
    'RuntimeConfig',
  ],
  ImageService: ['ListImages', 'ImageStatus', 'PullImage', 'RemoveImage', 'ImageFsInfo'],
};

const SCALARS: Readonly<Record<string, string>> = {
  TYPE_DOUBLE: 'double',
  TYPE_FLOAT: 'float',
  TYPE_INT64: 'int64',
  TYPE_UINT64: 'uint64',
  TYPE_INT32: 'int32',
  TYPE_FIXED64: 'fixed64',
  TYPE_FIXED32: 'fixed32',
  TYPE_BOOL: 'bool',
  TYPE_STRING: 'string',
  TYPE_BYTES: 'bytes',
  TYPE_UINT32: 'uint32',
  TYPE_SFIXED32: 'sfixed32',
  TYPE_SFIXED64: 'sfixed64',
  TYPE_SINT32: 'sint32',
  TYPE_SINT64: 'sint64',
};

function localName(file: FileDescriptor, typeName: string): string {
  return typeName.replace(`.${file.package}.`, '');
}

/** Names of the top-level messages and enums reachable from the used RPCs. */
export function reachableTypes(
  file: FileDescriptor,
  usedRpcs: Readonly<Record<string, readonly string[]>> = USED_RPCS,
): Set<string> {
  const messages = new Map(file.messageType.map((m) => [m.name, m]));
  const seen = new Set<string>();
  const visit = (name: string): void => {
    const top = name.split('.')[0] ?? name;
    if (seen.has(top)) return;
    seen.add(top);
    const walk = (m: MessageDescriptor): void => {
      for (const f of m.field ?? [])
        if (f.typeName !== undefined) visit(localName(file, f.typeName));
      for (const n of m.nestedType ?? []) walk(n);
    };
    const m = messages.get(top);
    if (m !== undefined) walk(m);
  };
  for (const service of file.service) {
    const used = usedRpcs[service.name] ?? [];
    for (const method of service.method) {
      if (!used.includes(method.name)) continue;
      visit(localName(file, method.inputType));
      visit(localName(file, method.outputType));
    }
  }
  return seen;
}

export function fieldType(
  file: FileDescriptor,
  owner: MessageDescriptor,
  f: FieldDescriptor,
): string {
  if (f.typeName === undefined) {
    const scalar = SCALARS[f.type];
    if (scalar === undefined) throw new Error(`Cannot render field ${f.name}: type ${f.type}`);
    return scalar;
  }
  const local = localName(file, f.typeName);
  const entryName = local.split('.').at(-1);
  const entry = owner.nestedType?.find((n) => n.name === entryName && n.options?.mapEntry === true);
  if (entry !== undefined) {
    const [k, v] = entry.field ?? [];
    if (k === undefined || v === undefined) throw new Error(`Cannot render map entry ${local}`);
    return `map<${fieldType(file, entry, k)}, ${fieldType(file, entry, v)}>`;
  }
  return local.startsWith(`${owner.name}.`) ? local.slice(owner.name.length + 1) : local;
}

export function renderEnum(e: EnumDescriptor, indent: string): string[] {
  return [
    `${indent}enum ${e.name} {`,
    ...e.value.map((v) => `${indent}  ${v.name} = ${v.number};`),
    `${indent}}`,
  ];
}

/**
 * One message with its nested enums, nested messages (CSI has them; CRI's only nested
 * messages are map entries, rendered as map<>) and oneofs (CSI's access_type).
 */
export function renderMessage(file: FileDescriptor, m: MessageDescriptor, indent = ''): string[] {
  const out = [`${indent}message ${m.name} {`];
  for (const e of m.enumType ?? []) out.push(...renderEnum(e, `${indent}  `));
  for (const n of m.nestedType ?? []) {
    if (n.options?.mapEntry !== true) out.push(...renderMessage(file, n, `${indent}  `));
  }
  const renderField = (f: FieldDescriptor, pad: string): string => {
    const type = fieldType(file, m, f);
    const repeated = f.label === 'LABEL_REPEATED' && !type.startsWith('map<');
    const label = repeated ? 'repeated ' : f.proto3Optional === true ? 'optional ' : '';
    const opts: string[] = [];
    if (f.options?.['deprecated'] === true) opts.push('deprecated = true');
    if (f.options?.['debugRedact'] === true) opts.push('debug_redact = true');
    const suffix = opts.length > 0 ? ` [${opts.join(', ')}]` : '';
    return `${pad}${label}${type} ${f.name} = ${f.number}${suffix};`;
  };
  const fields = m.field ?? [];
  const oneofsDone = new Set<number>();
  for (const f of fields) {
    const index = f.proto3Optional === true ? undefined : f.oneofIndex;
    if (index === undefined) {
      out.push(renderField(f, `${indent}  `));
      continue;
    }
    if (oneofsDone.has(index)) continue;
    oneofsDone.add(index);
    out.push(`${indent}  oneof ${m.oneofDecl?.[index]?.name ?? `oneof_${String(index)}`} {`);
    for (const member of fields) {
      if (member.oneofIndex === index) out.push(renderField(member, `${indent}    `));
    }
    out.push(`${indent}  }`);
  }
  out.push(`${indent}}`);
  return out;
}

export function renderSubset(file: FileDescriptor, version: string): string {
  const keep = reachableTypes(file);
  const lines = [
    '// The subset of the Kubernetes CRI v1 API (k8s.io/cri-api ' + version + ') that berth calls.',
    '// Generated by hack/cri-proto/subset.ts; test/unit/cri-proto-drift.test.ts fails when',
    '// it no longer matches upstream field for field. Field numbers are the wire contract.',
    'syntax = "proto3";',
    '',
    `package ${file.package};`,
    'option go_package = "k8s.io/cri-api/pkg/apis/runtime/v1";',
    '',
  ];
  for (const service of file.service) {
    const used = USED_RPCS[service.name] ?? [];
    lines.push(`service ${service.name} {`);
    for (const method of service.method) {
      if (!used.includes(method.name)) continue;
      const stream = method.serverStreaming === true ? 'stream ' : '';
      lines.push(
        `  rpc ${method.name}(${localName(file, method.inputType)}) returns (${stream}${localName(file, method.outputType)}) {}`,
      );
    }
    lines.push('}', '');
  }
  for (const m of file.messageType) if (keep.has(m.name)) lines.push(...renderMessage(file, m), '');
  for (const e of file.enumType ?? []) if (keep.has(e.name)) lines.push(...renderEnum(e, ''), '');
  return lines.join('\n');
}

if (import.meta.main) {
  const version = (await pinnedVersions())['CRI_API_VERSION'];
  if (version === undefined)
    throw new Error('Cannot generate the CRI subset: versions.env has no CRI_API_VERSION');
  const upstream = await loadProto(await upstreamCriProto(version));
  const target = new URL('../../proto/runtime/v1/api.proto', import.meta.url);
  await writeFile(target, renderSubset(upstream, version));
  console.log(`wrote ${target.pathname}`);
}
