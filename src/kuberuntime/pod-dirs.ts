/**
 * The kubelet's per-pod files outside volumes, laid out as upstream does under
 * `<rootDir>/pods/<uid>/`: `etc-hosts` (the managed /etc/hosts) and
 * `containers/<name>/<id>` (one termination-message file per container instance).
 * The volume manager removes the whole directory when the pod is gone.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError } from '../util/errors.ts';

export class PodDirError extends BerthError {
  constructor(message: string) {
    super('BERTH_POD_DIR_INVALID', message);
  }
}

// UIDs come from the API server (UUIDs) or a static pod's manifest hash; names are DNS
// labels. Anything else could walk out of the root, so it is refused.
const SAFE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

function safe(what: string, value: string): string {
  if (!SAFE.test(value) || value.includes('..'))
    throw new PodDirError(`Cannot use ${what} ${JSON.stringify(value)} as a path element`);
  return value;
}

export function podDir(rootDir: string, uid: string): string {
  return join(rootDir, 'pods', safe('pod UID', uid));
}

/** Creates an empty, world-writable termination-message file for a new container instance. */
export async function createTerminationLogFile(
  rootDir: string,
  uid: string,
  containerName: string,
): Promise<string> {
  const dir = join(podDir(rootDir, uid), 'containers', safe('container name', containerName));
  await mkdir(dir, { recursive: true, mode: 0o750 });
  const file = join(dir, randomBytes(4).toString('hex'));
  const fh = await open(
    file,
    constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW,
    0o666,
  );
  await fh.close();
  // Any container user must be able to write its message (the umask would narrow it).
  await chmod(file, 0o666);
  return file;
}

/** Writes the pod's managed hosts file atomically; returns its path. */
export async function writeEtcHosts(
  rootDir: string,
  uid: string,
  content: string,
): Promise<string> {
  const dir = podDir(rootDir, uid);
  await mkdir(dir, { recursive: true, mode: 0o750 });
  const file = join(dir, 'etc-hosts');
  const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, content, { mode: 0o644, flag: 'wx' });
    await chmod(tmp, 0o644);
    await rename(tmp, file);
  } catch (err) {
    // On a full disk the pod's directory keeps its previous hosts file and no
    // half-written temporary one (a name per attempt: they would pile up).
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
  return file;
}
