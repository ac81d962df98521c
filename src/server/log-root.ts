/**
 * Resolving a path below the node log directory, for /logs/<path> and the node log
 * query: symlinks are followed (realpath) and the result must still be below the
 * root, so a link planted by a container in a hostPath log directory never leads out.
 */
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { HttpError } from './handlers.ts';

/** Resolves the request below the root; 404 when missing, 403 when it leads out. */
export async function resolveBelow(root: string, rest: readonly string[]): Promise<string> {
  const realRoot = await realpath(root).catch((err: unknown) => {
    throw new HttpError(404, 'The node has no log directory', { cause: err });
  });
  const wanted = path.join(realRoot, ...rest);
  const real = await realpath(wanted).catch((err: unknown) => {
    throw new HttpError(404, `Cannot serve /logs/${rest.join('/')}: not found`, { cause: err });
  });
  if (real !== realRoot && !real.startsWith(`${realRoot}${path.sep}`)) {
    throw new HttpError(
      403,
      `Cannot serve /logs/${rest.join('/')} as it resolves outside the node log directory`,
    );
  }
  return real;
}
