/**
 * The kubelet's IDs for user namespaces (upstream's getKubeletMappings): the single
 * subordinate range of the user "kubelet", the same in /etc/subuid and /etc/subgid,
 * when that user exists; otherwise every ID from idsPerPod up to 2^32.
 *
 * Upstream asks `getsubids` (shadow's tool, which reads these files unless nsswitch
 * sends it elsewhere); berth reads the files, as getsubids does by default. Upstream
 * falls back to the default when getsubids is not installed; berth has no such case.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KUBELET_USER, UsernsError, type KubeletMappings } from './types.ts';

interface SubIdRange {
  readonly start: number;
  readonly count: number;
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The user's numeric UID from a passwd file, or undefined when it has no such user. */
export function passwdUid(passwd: string, user: string): string | undefined {
  for (const line of passwd.split('\n')) {
    const fields = line.split(':');
    if (fields[0] === user && fields.length >= 3) return fields[2];
  }
  return undefined;
}

/** The user's ranges in a subuid/subgid file: lines `name-or-uid:start:count`. */
export function subIdRanges(content: string, user: string, uid: string): SubIdRange[] {
  const out: SubIdRange[] = [];
  for (const raw of content.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [owner, start, count] = line.split(':');
    if (owner !== user && owner !== uid) continue;
    if (!/^\d+$/.test(start ?? '') || !/^\d+$/.test(count ?? ''))
      throw new UsernsError(`error parsing line "${line}": not owner:start:count`);
    out.push({ start: Number(start), count: Number(count) });
  }
  return out;
}

/** getsubids' output for the ranges, which upstream's messages quote. */
function asGetsubids(user: string, ranges: readonly SubIdRange[]): string {
  return ranges.map((r, i) => `${i}: ${user} ${r.start} ${r.count}`).join('\n');
}

export interface SubIdOptions {
  /** Where passwd, subuid and subgid are (default /etc; tests use a directory of their own). */
  readonly etcDir?: string;
}

export async function kubeletMappings(
  idsPerPod: number,
  o: SubIdOptions = {},
): Promise<KubeletMappings> {
  const etc = o.etcDir ?? '/etc';
  const fallback = { firstId: idsPerPod, length: 2 ** 32 - idsPerPod };
  const uid = passwdUid((await readOptional(join(etc, 'passwd'))) ?? '', KUBELET_USER);
  if (uid === undefined) return fallback;
  const uids = subIdRanges((await readOptional(join(etc, 'subuid'))) ?? '', KUBELET_USER, uid);
  const gids = subIdRanges((await readOptional(join(etc, 'subgid'))) ?? '', KUBELET_USER, uid);
  if (uids.length === 0)
    throw new UsernsError(
      `error retrieving additional uids for user "${KUBELET_USER}": no range in ${join(etc, 'subuid')}`,
    );
  const uidText = asGetsubids(KUBELET_USER, uids);
  if (uidText !== asGetsubids(KUBELET_USER, gids))
    throw new UsernsError(`mismatched subuids and subgids for user "${KUBELET_USER}"`);
  const [only] = uids;
  if (only === undefined || uids.length !== 1)
    throw new UsernsError(`error parsing line "${uidText}": it must contain only one line`);
  if (only.start >= 2 ** 32 || only.count >= 2 ** 32)
    throw new UsernsError(`error parsing line "${uidText}": value out of range`);
  return { firstId: only.start, length: only.count };
}
