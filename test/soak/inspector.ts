/**
 * berth's own view of its memory, through the V8 inspector it was started with
 * (NODE_OPTIONS=--inspect=127.0.0.1:<port>): a forced full GC, then process.memoryUsage()
 * and the active handles and requests (timers, sockets) as Node counts them; and heap
 * snapshots (heap-diff.ts compares two), to find what grows.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { WebSocket } from 'ws';
import { fetchLocal } from '../harness/net.ts';

export interface MemorySample {
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  /** process.getActiveResourcesInfo() counted by kind: Timeout, TCPSocketWrap, ... */
  readonly resources: Readonly<Record<string, number>>;
}

const SAMPLE = `JSON.stringify({ ...process.memoryUsage(), resources: process
  .getActiveResourcesInfo()
  .reduce((m, k) => ({ ...m, [k]: (m[k] ?? 0) + 1 }), {}) })`;

/** A session with the inspector of the process listening on `port`. */
export class InspectorSession {
  readonly #ws: WebSocket;
  #next = 1;
  readonly #pending = new Map<number, (result: unknown) => void>();

  /** Where the chunks of the heap snapshot being taken go. */
  #snapshot: WriteStream | undefined;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString()) as {
        id?: number;
        result?: unknown;
        method?: string;
        params?: { chunk?: string };
      };
      if (msg.method === 'HeapProfiler.addHeapSnapshotChunk') {
        this.#snapshot?.write(msg.params?.chunk ?? '');
        return;
      }
      if (msg.id === undefined) return;
      this.#pending.get(msg.id)?.(msg.result);
      this.#pending.delete(msg.id);
    });
  }

  static async open(port: number): Promise<InspectorSession> {
    const list = JSON.parse(
      (await fetchLocal(`http://127.0.0.1:${port}/json/list`)).body.toString(),
    ) as { webSocketDebuggerUrl: string }[];
    const url = list[0]?.webSocketDebuggerUrl;
    if (url === undefined) throw new Error(`Cannot find an inspector target on port ${port}`);
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => {
        resolve();
      });
      ws.once('error', reject);
    });
    return new InspectorSession(ws);
  }

  #call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, resolve);
      this.#ws.send(JSON.stringify({ id, method, params }), (err) => {
        if (err instanceof Error) reject(err);
      });
    });
  }

  /** Two full collections (the second frees what the first finalized), then a sample. */
  async sampleAfterGc(): Promise<MemorySample> {
    await this.#call('HeapProfiler.collectGarbage');
    await this.#call('HeapProfiler.collectGarbage');
    const r = (await this.#call('Runtime.evaluate', {
      expression: SAMPLE,
      returnByValue: true,
    })) as { result?: { value?: string } };
    const value = r.result?.value;
    if (value === undefined) throw new Error('Cannot read berth memory through the inspector');
    return JSON.parse(value) as MemorySample;
  }

  /** Writes a heap snapshot (after the collections takeHeapSnapshot makes) to `file`. */
  async writeHeapSnapshot(file: string): Promise<void> {
    if (this.#snapshot !== undefined) throw new Error('Cannot take two heap snapshots at once');
    const out = createWriteStream(file);
    this.#snapshot = out;
    try {
      await this.#call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    } finally {
      this.#snapshot = undefined;
      await new Promise<void>((resolve, reject) => {
        out.end((err?: Error | null) => {
          if (err instanceof Error) reject(err);
          else resolve();
        });
      });
    }
  }

  close(): void {
    this.#ws.close();
  }
}
