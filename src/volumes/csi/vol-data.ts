/**
 * `vol_data.json`, the file upstream's CSI plugin writes beside each staging and
 * publishing target: what the unmount side needs (driver, handle) when the pod spec is
 * gone, e.g. after a restart or for a pod deleted while the kubelet was down. Keys and
 * format are upstream's (a flat JSON object of strings), so either kubelet can tear
 * down what the other set up.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { VOL_DATA_FILE } from './paths.ts';

export interface VolData {
  readonly specVolID?: string;
  readonly volumeHandle: string;
  readonly driverName: string;
  readonly nodeName?: string;
  readonly attachmentID?: string;
  readonly volumeLifecycleMode?: string;
}

/** Writes `<dir>/vol_data.json` atomically (temp file, then rename). */
export async function saveVolData(dir: string, data: VolData): Promise<void> {
  const file = path.join(dir, VOL_DATA_FILE);
  const tmp = `${file}.tmp`;
  await writeFile(tmp, JSON.stringify(data), { mode: 0o640 });
  await rename(tmp, file);
}

/**
 * Reads `<dir>/vol_data.json`; undefined when the file does not exist. A file that is
 * not a JSON object of strings with a driver and handle is an error: the caller must
 * not guess what to unmount.
 */
export async function loadVolData(dir: string): Promise<VolData | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(dir, VOL_DATA_FILE), 'utf8');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return undefined;
    throw err;
  }
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`${path.join(dir, VOL_DATA_FILE)} is not a JSON object`);
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (typeof v !== 'string')
      throw new Error(`${path.join(dir, VOL_DATA_FILE)}: ${k} is not a string`);
    out[k] = v;
  }
  const { driverName, volumeHandle } = out;
  if (
    driverName === undefined ||
    driverName === '' ||
    volumeHandle === undefined ||
    volumeHandle === ''
  ) {
    throw new Error(`${path.join(dir, VOL_DATA_FILE)} names no driver or volume handle`);
  }
  return { ...out, driverName, volumeHandle };
}
