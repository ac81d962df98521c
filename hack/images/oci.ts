/**
 * Writes a single-layer OCI image layout (oci-layout, index.json, blobs/sha256/*) from
 * a root filesystem directory, plus an archive of that layout that `ctr images import`
 * accepts. Everything is deterministic (sorted names, zero mtimes, fixed owners), so
 * the same inputs always give the same digests.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { run } from '../../test/harness/exec.ts';

export interface ImageConfig {
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  readonly env?: readonly string[];
  readonly workingDir?: string;
  readonly user?: string;
}

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
}

export const MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json';
export const CONFIG_TYPE = 'application/vnd.oci.image.config.v1+json';
export const LAYER_TYPE = 'application/vnd.oci.image.layer.v1.tar+gzip';

function sha256(data: Uint8Array): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

async function writeBlob(layout: string, data: Uint8Array, mediaType: string): Promise<Descriptor> {
  const digest = sha256(data);
  await writeFile(join(layout, 'blobs', 'sha256', digest.slice('sha256:'.length)), data);
  return { mediaType, digest, size: data.byteLength };
}

/**
 * Builds the layout at `layout` from `rootfs`. `ref` is the full reference recorded
 * for importers (e.g. berth.local/pause:1.0). Returns the manifest descriptor.
 */
export async function writeOciLayout(
  rootfs: string,
  layout: string,
  ref: string,
  config: ImageConfig,
): Promise<Descriptor> {
  const tmp = `${layout}.tmp`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(join(tmp, 'blobs', 'sha256'), { recursive: true });
  await run('tar', [
    '--sort=name',
    '--mtime=@0',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--format=gnu',
    '-C',
    rootfs,
    '-cf',
    join(tmp, 'layer.tar'),
    '.',
  ]);
  const layerTar = await readFile(join(tmp, 'layer.tar'));
  await rm(join(tmp, 'layer.tar'));
  // gzip without a name or timestamp keeps the digest reproducible.
  const layer = await writeBlob(tmp, gzipSync(layerTar, { level: 9 }), LAYER_TYPE);
  const imageConfig = {
    architecture: 'amd64',
    os: 'linux',
    config: {
      ...(config.entrypoint !== undefined && { Entrypoint: config.entrypoint }),
      ...(config.cmd !== undefined && { Cmd: config.cmd }),
      Env: config.env ?? ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
      ...(config.workingDir !== undefined && { WorkingDir: config.workingDir }),
      ...(config.user !== undefined && { User: config.user }),
    },
    rootfs: { type: 'layers', diff_ids: [sha256(layerTar)] },
    history: [{ created: '1970-01-01T00:00:00Z', created_by: `berth hack/images (${ref})` }],
  };
  const configDesc = await writeBlob(tmp, Buffer.from(JSON.stringify(imageConfig)), CONFIG_TYPE);
  const manifest = {
    schemaVersion: 2,
    mediaType: MANIFEST_TYPE,
    config: configDesc,
    layers: [layer],
  };
  const manifestDesc = await writeBlob(tmp, Buffer.from(JSON.stringify(manifest)), MANIFEST_TYPE);
  const tag = ref.slice(ref.lastIndexOf(':') + 1);
  const index = {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [
      {
        ...manifestDesc,
        platform: { architecture: 'amd64', os: 'linux' },
        annotations: { 'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': tag },
      },
    ],
  };
  await writeFile(join(tmp, 'index.json'), JSON.stringify(index));
  await writeFile(join(tmp, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  await rm(layout, { recursive: true, force: true });
  await rename(tmp, layout);
  await run('tar', [
    '--sort=name',
    '--mtime=@0',
    '--owner=0',
    '--group=0',
    '-C',
    layout,
    '-cf',
    `${layout}.tar`,
    '.',
  ]);
  return manifestDesc;
}

/** Reads the manifest descriptor, manifest and blob paths of a layout written above. */
export async function readOciLayout(layout: string): Promise<{
  manifest: Descriptor;
  manifestBytes: Buffer;
  blobs: readonly Descriptor[];
  blobPath: (d: Descriptor) => string;
}> {
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as {
    manifests: Descriptor[];
  };
  const manifest = index.manifests[0];
  if (manifest === undefined)
    throw new Error(`Cannot read image layout ${layout}: index.json lists no manifest`);
  const blobPath = (d: Descriptor): string =>
    join(layout, 'blobs', 'sha256', d.digest.slice('sha256:'.length));
  const manifestBytes = await readFile(blobPath(manifest));
  const parsed = JSON.parse(manifestBytes.toString('utf8')) as {
    config: Descriptor;
    layers: Descriptor[];
  };
  return { manifest, manifestBytes, blobs: [...parsed.layers, parsed.config], blobPath };
}
