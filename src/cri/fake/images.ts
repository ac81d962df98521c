/**
 * The fake's images: a registry model (what can be pulled, and with which credentials)
 * and the runtime's local store (what has been pulled or preloaded). Names are
 * normalised the way containerd does ("busybox" is docker.io/library/busybox:latest),
 * and an image is found by reference, by repo digest, by id or by a unique id prefix.
 */
import { createHash } from 'node:crypto';
import { status as GrpcStatus } from '@grpc/grpc-js';
import * as api from '../gen/runtime/v1/api.ts';
import { RpcFailure, failed } from './rpc-failure.ts';
import type { FakeImageOptions, FakeImageRef, ImageHandlers } from './types.ts';

/** A parsed image reference. */
export interface ImageName {
  /** Registry host, e.g. docker.io or 127.0.0.1:5000. */
  readonly domain: string;
  /** "<domain>/<path>", e.g. docker.io/library/busybox. */
  readonly repository: string;
  readonly path: string;
  readonly tag?: string;
  readonly digest?: string;
  /** "<repository>:<tag>" or "<repository>@<digest>". */
  readonly normalized: string;
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const HEX_ID = /^[0-9a-f]{64}$/;
const ID_PREFIX = /^(?:sha256:)?[0-9a-f]{4,63}$/;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;

/** Parses a reference as containerd does; undefined when it is not a valid reference. */
export function parseImageName(ref: string): ImageName | undefined {
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) return undefined;
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!/^[\w][\w.-]{0,127}$/.test(tag)) return undefined;
  }
  const parts = rest.split('/');
  const first = parts[0] ?? '';
  const hasDomain =
    parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost');
  const domain = hasDomain ? first : 'docker.io';
  const pathParts = hasDomain ? parts.slice(1) : parts;
  if (domain === 'docker.io' && pathParts.length === 1) pathParts.unshift('library');
  if (pathParts.length === 0 || !pathParts.every((p) => PATH_COMPONENT.test(p))) return undefined;
  const path = pathParts.join('/');
  const repository = `${domain}/${path}`;
  if (digest === undefined) tag ??= 'latest';
  const normalized =
    digest !== undefined ? `${repository}@${digest}` : `${repository}:${tag ?? 'latest'}`;
  return {
    domain,
    repository,
    path,
    normalized,
    ...(tag !== undefined && { tag }),
    ...(digest !== undefined && { digest }),
  };
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

interface RegistryImage {
  readonly id: string;
  readonly repoDigest: string;
  readonly sizeBytes: number;
  readonly uid: bigint | undefined;
  readonly credentials: FakeImageOptions['credentials'];
}

/** An image in the runtime's store. */
export interface LocalImage {
  readonly id: string;
  readonly repoTags: Set<string>;
  readonly repoDigests: Set<string>;
  readonly sizeBytes: number;
  readonly uid: bigint | undefined;
  pinned: boolean;
}

function authorized(
  auth: api.AuthConfig | undefined,
  expected: NonNullable<FakeImageOptions['credentials']>,
): boolean {
  if (auth === undefined) return false;
  if (auth.username === expected.username && auth.password === expected.password) return true;
  // The "auth" field is base64("user:password"), as in a docker config.json.
  return (
    auth.auth !== '' &&
    Buffer.from(auth.auth, 'base64').toString() === `${expected.username}:${expected.password}`
  );
}

/** The fake registry and the runtime's image store. */
export class FakeImageStore {
  readonly #registry = new Map<string, RegistryImage>();
  readonly #local = new Map<string, LocalImage>();
  readonly #mountpoint: string;
  readonly #nowNs: () => bigint;

  constructor(mountpoint: string, nowNs: () => bigint) {
    this.#mountpoint = mountpoint;
    this.#nowNs = nowNs;
  }

  /** The snapshotter's mount point, reported by ImageFsInfo and as writable-layer fsId. */
  get mountpoint(): string {
    return this.#mountpoint;
  }

  add(ref: string, options: FakeImageOptions = {}): FakeImageRef {
    const name = parseImageName(ref);
    if (name?.tag === undefined || name.digest !== undefined)
      throw new Error(`Cannot add image ${ref}: expected a tagged reference such as repo:tag`);
    const id = options.id ?? `sha256:${sha256(`image ${name.normalized}`)}`;
    if (!DIGEST.test(id)) throw new Error(`Cannot add image ${ref}: id ${id} is not sha256:<hex>`);
    const repoDigest = `${name.repository}@sha256:${sha256(`manifest ${name.normalized} ${id}`)}`;
    const image: RegistryImage = {
      id,
      repoDigest,
      sizeBytes: options.sizeBytes ?? 1_048_576,
      uid: options.uid,
      credentials: options.credentials,
    };
    if (options.pullable !== false) {
      this.#registry.set(name.normalized, image);
      this.#registry.set(repoDigest, image);
    }
    if (options.preloaded === true) this.#store(image, name.normalized, undefined);
    return { id, repoDigest };
  }

  /** Finds a local image by reference, repo digest, id or unique id prefix. */
  resolve(nameOrId: string): LocalImage | undefined {
    if (DIGEST.test(nameOrId)) return this.#local.get(nameOrId);
    if (HEX_ID.test(nameOrId)) return this.#local.get(`sha256:${nameOrId}`);
    const name = parseImageName(nameOrId);
    if (name !== undefined) {
      for (const image of this.#local.values()) {
        if (image.repoTags.has(name.normalized) || image.repoDigests.has(name.normalized))
          return image;
      }
    }
    if (!ID_PREFIX.test(nameOrId)) return undefined;
    const prefix = nameOrId.startsWith('sha256:') ? nameOrId : `sha256:${nameOrId}`;
    const matches = [...this.#local.values()].filter((i) => i.id.startsWith(prefix));
    return matches.length === 1 ? matches[0] : undefined;
  }

  /** The name ContainerStatus reports: the reference asked for, else the first tag, else the id. */
  displayName(image: LocalImage, requested: string): string {
    const name = parseImageName(requested);
    if (name !== undefined && image.repoTags.has(name.normalized)) return name.normalized;
    return [...image.repoTags].sort()[0] ?? image.id;
  }

  /** Pins the image (the sandbox image, which image GC must keep). */
  pin(ref: string): void {
    const image = this.resolve(ref);
    if (image !== undefined) image.pinned = true;
  }

  handlers(): ImageHandlers {
    return {
      listImages: () =>
        // containerd ignores ListImages' filter (it lists every image); so does the fake.
        ({ images: [...this.#local.values()].map((i) => this.#proto(i)) }),
      imageStatus: (req) => {
        const image = this.resolve(req.image?.image ?? '');
        return { image: image === undefined ? undefined : this.#proto(image), info: {} };
      },
      pullImage: (req) => ({ imageRef: this.#pull(req) }),
      removeImage: (req) => {
        const image = this.resolve(req.image?.image ?? '');
        // Removing an image that is not there succeeds: the CRI asks for idempotence.
        if (image !== undefined) this.#local.delete(image.id);
        return {};
      },
      imageFsInfo: () => {
        const images = [...this.#local.values()];
        const used = images.reduce((sum, i) => sum + BigInt(i.sizeBytes), 0n);
        return {
          imageFilesystems: [
            api.FilesystemUsage.fromPartial({
              timestamp: this.#nowNs(),
              fsId: { mountpoint: this.#mountpoint },
              usedBytes: { value: used },
              inodesUsed: { value: BigInt(images.length) },
            }),
          ],
          containerFilesystems: [],
        };
      },
    };
  }

  #pull(req: api.PullImageRequest): string {
    const ref = req.image?.image ?? '';
    const name = parseImageName(ref);
    if (name === undefined)
      throw new RpcFailure(GrpcStatus.INVALID_ARGUMENT, `invalid image reference "${ref}"`);
    const image = this.#registry.get(name.normalized);
    if (image === undefined)
      throw new RpcFailure(
        GrpcStatus.NOT_FOUND,
        `failed to pull image "${ref}": ${name.normalized}: not found`,
      );
    if (image.credentials !== undefined && !authorized(req.auth, image.credentials)) {
      // containerd reports registry refusals as Unknown with the registry's answer in the
      // text; the client classifies them by that text, so the fake answers the same way.
      const manifest = `https://${name.domain}/v2/${name.path}/manifests/${name.tag ?? name.digest ?? ''}`;
      throw failed(`failed to pull image "${ref}": ${manifest}: 401 Unauthorized`);
    }
    this.#store(image, name.digest === undefined ? name.normalized : undefined, image.repoDigest);
    return image.id;
  }

  #store(image: RegistryImage, tag: string | undefined, repoDigest: string | undefined): void {
    let local = this.#local.get(image.id);
    if (local === undefined) {
      local = {
        id: image.id,
        repoTags: new Set(),
        repoDigests: new Set(),
        sizeBytes: image.sizeBytes,
        uid: image.uid,
        pinned: false,
      };
      this.#local.set(image.id, local);
    }
    // A tag names one image: moving it to this one takes it from any other.
    if (tag !== undefined) {
      for (const other of this.#local.values()) other.repoTags.delete(tag);
      local.repoTags.add(tag);
    }
    if (repoDigest !== undefined) local.repoDigests.add(repoDigest);
  }

  #proto(image: LocalImage): api.Image {
    return api.Image.fromPartial({
      id: image.id,
      repoTags: [...image.repoTags].sort(),
      repoDigests: [...image.repoDigests].sort(),
      size: BigInt(image.sizeBytes),
      uid: image.uid === undefined ? undefined : { value: image.uid },
      pinned: image.pinned,
    });
  }
}
