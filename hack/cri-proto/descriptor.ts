/**
 * Loads a .proto file as a protobuf FileDescriptorSet (JSON form) by running buf,
 * which compiles offline. Used by the subset generator and by the drift test, so
 * both read the CRI schema the same way a protobuf compiler does.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, copyFile, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** One field as buf prints it (descriptor.proto's FieldDescriptorProto, JSON names). */
export interface FieldDescriptor {
  readonly name: string;
  readonly number: number;
  readonly label: string;
  readonly type: string;
  readonly typeName?: string;
  /** Index into the owner's oneofDecl when the field is a oneof member. */
  readonly oneofIndex?: number;
  readonly proto3Optional?: boolean;
  readonly options?: Readonly<Record<string, unknown>>;
}

export interface MessageDescriptor {
  readonly name: string;
  readonly field?: readonly FieldDescriptor[];
  readonly nestedType?: readonly MessageDescriptor[];
  readonly enumType?: readonly EnumDescriptor[];
  readonly oneofDecl?: readonly { readonly name: string }[];
  readonly options?: { readonly mapEntry?: boolean };
}

export interface EnumDescriptor {
  readonly name: string;
  readonly value: readonly { readonly name: string; readonly number: number }[];
}

export interface MethodDescriptor {
  readonly name: string;
  readonly inputType: string;
  readonly outputType: string;
  readonly serverStreaming?: boolean;
  readonly clientStreaming?: boolean;
}

export interface ServiceDescriptor {
  readonly name: string;
  readonly method: readonly MethodDescriptor[];
}

export interface FileDescriptor {
  readonly name?: string;
  readonly package: string;
  readonly messageType: readonly MessageDescriptor[];
  readonly enumType?: readonly EnumDescriptor[];
  readonly service: readonly ServiceDescriptor[];
}

const bufBinary = new URL('../../node_modules/.bin/buf', import.meta.url).pathname;

/** Compiles one self-contained .proto file (no imports) and returns its descriptor. */
export async function loadProto(path: string): Promise<FileDescriptor> {
  // buf compiles a directory; copy the file alone so nothing else in its folder interferes.
  const dir = await mkdtemp(join(tmpdir(), 'berth-proto-'));
  try {
    const name = basename(path);
    await copyFile(path, join(dir, name));
    const out = join(dir, 'fds.json');
    await run(bufBinary, ['build', dir, '--as-file-descriptor-set', '-o', out]);
    const parsed = JSON.parse(await readFile(out, 'utf8')) as { file: FileDescriptor[] };
    // Imports (CSI's google/protobuf ones) come first in the set: pick the file itself.
    const file = parsed.file.find((f) => f.name === name) ?? parsed.file[0];
    if (file === undefined) throw new Error(`Cannot load ${path}: buf produced no file descriptor`);
    return file;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The upstream CRI api.proto in the Go module cache, downloading the module if needed. */
export async function upstreamCriProto(version: string): Promise<string> {
  const { stdout } = await run('go', ['mod', 'download', '-json', `k8s.io/cri-api@${version}`], {
    env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
  });
  const info = JSON.parse(stdout) as { Dir?: string; Error?: string };
  if (info.Dir === undefined) {
    throw new Error(
      `Cannot download k8s.io/cri-api@${version}: ${info.Error ?? 'no module directory'}`,
    );
  }
  return join(info.Dir, 'pkg/apis/runtime/v1/api.proto');
}

/** Reads KEY=value pairs from versions.env (the one file that pins external versions). */
export async function pinnedVersions(): Promise<Readonly<Record<string, string>>> {
  const text = await readFile(new URL('../../versions.env', import.meta.url), 'utf8');
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z0-9_]+)=(\S+)/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) out[m[1]] = m[2];
  }
  return out;
}
