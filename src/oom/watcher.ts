/**
 * Follows the kernel log and records a SystemOOM Warning on the Node for each OOM kill
 * outside a container's own limit (see types.ts). The log is polled (every second by
 * default): /dev/kmsg is read non-blocking so no libuv thread ever waits on it.
 *
 * Deliberate differences from upstream: a kernel log that cannot be opened is logged
 * and the watcher stays off (upstream refuses to start the kubelet), and a malformed
 * record is logged and skipped (upstream's parser stops reporting OOMs for good).
 */
import type { EventRecorder } from '../events/types.ts';
import type { Clock } from '../util/clock.ts';
import { isAborted } from '../util/errors.ts';
import type { Logger } from '../util/logger.ts';
import { isSystemOom, OomParser, parseKmsgRecord, systemOomMessage } from './parser.ts';
import type { KmsgSource, OomInstance } from './types.ts';

export const SYSTEM_OOM_REASON = 'SystemOOM';

export interface OomWatcherOptions {
  readonly source: KmsgSource;
  /** Wall-clock boot time in ms (kmsg timestamps count from it). */
  readonly bootTimeMs: (now: number) => Promise<number>;
  readonly recorder: EventRecorder;
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Default 1000 ms. */
  readonly pollMs?: number;
  /** Every parsed kill, system or not (upstream counts them per cgroup). */
  readonly onOom?: (oom: OomInstance) => void;
}

export class OomWatcher {
  readonly #o: OomWatcherOptions;
  readonly #log: Logger;

  constructor(options: OomWatcherOptions) {
    this.#o = options;
    this.#log = options.logger.child({ component: 'oom-watcher' });
  }

  /** Runs until `signal` aborts; resolves (never rejects) when the log cannot be read. */
  async run(signal: AbortSignal): Promise<void> {
    const { source, clock } = this.#o;
    try {
      const boot = await this.#o.bootTimeMs(clock.now());
      const parser = new OomParser((err) => {
        this.#log.error('Failed to parse OOM container name', { error: err.message });
      });
      while (!signal.aborted) {
        for (const record of await source.read(signal)) this.#handle(record, boot, parser);
        await clock.sleep(this.#o.pollMs ?? 1000, signal).catch(() => undefined);
      }
    } catch (err) {
      if (!isAborted(signal)) {
        this.#log.error('Exiting kmsg parse; OOM events will not be reported', {
          error: err instanceof Error ? err.message : String(err),
        });
      }
    } finally {
      await source.close();
    }
  }

  #handle(record: string, boot: number, parser: OomParser): void {
    let oom: OomInstance | undefined;
    try {
      oom = parser.feed(parseKmsgRecord(record, boot));
    } catch (err) {
      this.#log.warn('Skipping a malformed kmsg record', {
        error: err instanceof Error ? err.message : String(err),
      });
      return;
    }
    if (oom === undefined) return;
    this.#o.onOom?.(oom);
    if (!isSystemOom(oom)) {
      // The container's own limit: its status says OOMKilled; the node is not at fault.
      this.#log.info('OOM kill inside a cgroup limit', {
        pid: oom.pid,
        process: oom.processName,
        constraint: oom.constraint,
        victimCgroup: oom.victimContainerName,
      });
      return;
    }
    this.#log.info('Got sys oom event', {
      pid: oom.pid,
      process: oom.processName,
      constraint: oom.constraint,
      containerName: oom.containerName,
    });
    const name = this.#o.nodeName;
    this.#o.recorder.event(
      { kind: 'Node', name, uid: name },
      'Warning',
      SYSTEM_OOM_REASON,
      systemOomMessage(oom),
    );
  }
}
