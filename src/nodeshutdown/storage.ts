/**
 * The last graceful shutdown's start and end (upstream's storage.go): a JSON file in the
 * kubelet's root directory, so the graceful_shutdown_*_time_seconds metrics survive the
 * reboot the shutdown was for. Written atomically (temporary file, fsync, rename), as a
 * torn file would be read back after a power cut.
 */
import { open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export const LOCAL_STORAGE_STATE_FILE = 'graceful_node_shutdown_state';

/** Go's zero time.Time as encoding/json writes it: "not set". */
const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

export interface ShutdownState {
  /** Milliseconds since the epoch; undefined: not set. */
  readonly startTime?: number;
  readonly endTime?: number;
}

function encode(ms: number | undefined): string {
  return ms === undefined ? GO_ZERO_TIME : new Date(ms).toISOString();
}

function decode(value: unknown): number | undefined {
  if (typeof value !== 'string' || value === GO_ZERO_TIME) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

export class ShutdownStateStorage {
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
  }

  /** The stored state; empty when there is no file yet. */
  async load(): Promise<ShutdownState> {
    let text: string;
    try {
      text = await readFile(this.#path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
    const data = JSON.parse(text) as { startTime?: unknown; endTime?: unknown };
    const startTime = decode(data.startTime);
    const endTime = decode(data.endTime);
    return {
      ...(startTime !== undefined && { startTime }),
      ...(endTime !== undefined && { endTime }),
    };
  }

  async store(state: ShutdownState): Promise<void> {
    const body = JSON.stringify({
      startTime: encode(state.startTime),
      endTime: encode(state.endTime),
    });
    const tmp = join(dirname(this.#path), `.tmp-${basename(this.#path)}-${process.pid}`);
    try {
      const f = await open(tmp, 'w', 0o644);
      try {
        await f.writeFile(body);
        await f.sync();
      } finally {
        await f.close();
      }
      await rename(tmp, this.#path);
    } catch (err) {
      // A full disk must not leave the half-written temporary file behind.
      await rm(tmp, { force: true }).catch(() => undefined);
      throw err;
    }
  }
}
