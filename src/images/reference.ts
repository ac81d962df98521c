/**
 * Image references as the container ecosystem parses them (the distribution
 * "reference" grammar): [domain[:port]/]path[:tag][@digest]. The kubelet applies the
 * default tag itself: a reference without tag or digest means :latest.
 */
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const DOMAIN_PART = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(
  `^(?:(${DOMAIN})/)?(${COMPONENT}(?:/${COMPONENT})*)(?::(${TAG}))?(?:@(${DIGEST}))?$`,
);

export interface ImageReference {
  /** Registry host[:port]; "docker.io" when the reference names none. */
  readonly domain: string;
  readonly path: string;
  readonly tag?: string;
  readonly digest?: string;
  /** The reference with the default tag applied, as given to the runtime. */
  readonly normalized: string;
}

export class InvalidImageReferenceError extends Error {
  readonly code = 'BERTH_INVALID_IMAGE_NAME';
  constructor(image: string) {
    super(`couldn't parse image name "${image}": invalid reference format`);
    this.name = 'InvalidImageReferenceError';
  }
}

/** Parses `image`; throws InvalidImageReferenceError when it is not a valid reference. */
export function parseImageReference(image: string): ImageReference {
  if (image.length === 0 || image.length > 255 + 128 + 80)
    throw new InvalidImageReferenceError(image);
  const m = REFERENCE.exec(image);
  if (m === null) throw new InvalidImageReferenceError(image);
  let domain = m[1];
  let path = m[2] ?? '';
  // "foo/bar": the first part is a registry only if it looks like a host.
  if (domain !== undefined && !/[.:]|^localhost$|^\[/.test(domain)) {
    path = `${domain}/${path}`;
    domain = undefined;
  }
  // A first part moved into the path must obey the path grammar (lowercase) too.
  if (/[A-Z]/.test(path)) throw new InvalidImageReferenceError(image);
  const tag = m[3];
  const digest = m[4];
  const normalized = tag === undefined && digest === undefined ? `${image}:latest` : image;
  return {
    domain: domain ?? 'docker.io',
    path,
    ...(tag !== undefined && { tag }),
    ...(digest !== undefined && { digest }),
    normalized,
  };
}

/**
 * The container's imagePullPolicy, or the API's default when it is unset: Always for
 * :latest or an untagged, undigested image, else IfNotPresent.
 */
export function pullPolicyOf(
  container: { readonly imagePullPolicy?: string },
  ref: ImageReference,
): string {
  return (
    container.imagePullPolicy ??
    (ref.tag === 'latest' || (ref.tag === undefined && ref.digest === undefined)
      ? 'Always'
      : 'IfNotPresent')
  );
}
