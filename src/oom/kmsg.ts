/**
 * /dev/kmsg read without ever blocking a libuv thread: the device is opened
 * non-blocking and drained until EAGAIN, each read(2) returning one record. EPIPE means
 * the kernel overwrote records before they were read: skipped, as kmsgparser does.
 * Reading starts at the oldest record the ring buffer still holds, as upstream's parser
 * does (it never seeks to the end).
 */
import { constants } from 'node:fs';
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { OomError, type KmsgSource } from './types.ts';

const RECORD_MAX = 8192;

function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

export class DevKmsgSource implements KmsgSource {
  readonly #path: string;
  #handle: FileHandle | undefined;
  readonly #buffer = Buffer.alloc(RECORD_MAX);

  constructor(path = '/dev/kmsg') {
    this.#path = path;
  }

  /** Opens the device; throws OomError BERTH_OOM_KMSG_OPEN (e.g. not root, no device). */
  async open(): Promise<void> {
    if (this.#handle !== undefined) return;
    try {
      this.#handle = await open(this.#path, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (err) {
      throw new OomError(
        'BERTH_OOM_KMSG_OPEN',
        `Cannot watch for OOM kills as ${this.#path} cannot be opened: ${errnoCode(err) ?? String(err)}`,
        { cause: err },
      );
    }
  }

  async read(signal: AbortSignal): Promise<string[]> {
    await this.open();
    const handle = this.#handle;
    if (handle === undefined) return [];
    const out: string[] = [];
    while (!signal.aborted) {
      try {
        const { bytesRead } = await handle.read(this.#buffer, 0, RECORD_MAX, null);
        if (bytesRead === 0) break;
        out.push(this.#buffer.toString('utf8', 0, bytesRead));
      } catch (err) {
        const code = errnoCode(err);
        if (code === 'EAGAIN') break;
        if (code === 'EPIPE') continue;
        throw new OomError(
          'BERTH_OOM_KMSG_READ',
          `unexpected kmsg reading error: ${code ?? String(err)}`,
          {
            cause: err,
          },
        );
      }
    }
    return out;
  }

  async close(): Promise<void> {
    const handle = this.#handle;
    this.#handle = undefined;
    await handle?.close();
  }
}

/** Boot time in wall-clock milliseconds (now minus /proc/uptime), as kmsgparser. */
export async function bootTimeMs(now: number, uptimePath = '/proc/uptime'): Promise<number> {
  const text = await readFile(uptimePath, 'utf8');
  const seconds = Number(text.split(' ')[0]);
  if (!Number.isFinite(seconds)) {
    throw new OomError(
      'BERTH_OOM_KMSG_OPEN',
      `Cannot read the boot time from ${uptimePath}: ${JSON.stringify(text)}`,
    );
  }
  return now - seconds * 1000;
}
