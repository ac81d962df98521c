/**
 * Pure parsing of the kernel log: a /dev/kmsg record ("prio,seq,usec,flags;message",
 * kmsgparser's format) and the OOM kill it belongs to, with cadvisor's oomparser
 * expressions so that what upstream reports, berth reports the same way.
 */
import { OomError, type KmsgMessage, type OomInstance } from './types.ts';

// cadvisor's expressions, unchanged: the kernel's wording is the contract.
const LEGACY_CONTAINER = /Task in (.*) killed as a result of limit of (.*)/;
const CONTAINER =
  /oom-kill:constraint=(.*),nodemask=(.*),cpuset=(.*),mems_allowed=(.*),oom_memcg=(.*),task_memcg=(.*),task=(.*),pid=(.*),uid=(.*)/;
const LAST_LINE = /Killed process ([0-9]+) \((.+)\)/;
const FIRST_LINE = /invoked oom-killer:/;

/** Parses one record; throws OomError BERTH_OOM_KMSG_MALFORMED with kmsgparser's texts. */
export function parseKmsgRecord(input: string, bootTimeMs: number): KmsgMessage {
  const semi = input.indexOf(';');
  if (semi < 0) {
    throw new OomError('BERTH_OOM_KMSG_MALFORMED', "invalid kmsg; must contain a ';'");
  }
  const meta = input.slice(0, semi).split(',');
  // The text ends at the first newline; continuation lines (" KEY=value") follow it.
  const message = input.slice(semi + 1).split('\n', 1)[0] ?? '';
  if (meta.length < 3) {
    throw new OomError(
      'BERTH_OOM_KMSG_MALFORMED',
      "invalid kmsg: must contain at least 3 ',' separated pieces at the start",
    );
  }
  const [priority = '', sequence = '', usec = ''] = meta;
  const number = (text: string, what: string): number => {
    if (!/^[+-]?\d+$/.test(text)) {
      throw new OomError('BERTH_OOM_KMSG_MALFORMED', `could not parse "${text}" as ${what}`);
    }
    return Number(text);
  };
  return {
    priority: number(priority, 'priority'),
    sequence: number(sequence, 'sequence number'),
    timestampMs: bootTimeMs + number(usec, 'timestamp') / 1000,
    message,
  };
}

/** Joins posix paths as Go's path.Join("/", p) does for cgroup names. */
function rooted(p: string): string {
  const parts: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

interface Building {
  pid: number;
  processName: string;
  timeOfDeathMs: number;
  containerName: string;
  victimContainerName: string;
  constraint: string;
}

/**
 * Follows the records of the kernel log and yields each OOM kill once its last line is
 * seen (oomparser.StreamOoms): a kill starts at "invoked oom-killer:" and ends at the
 * "oom-kill:" summary (kernels since 4.19) or, on older kernels, "Killed process".
 * A number that does not parse is reported through `onError` and the line is skipped,
 * as upstream logs it and goes on.
 */
export class OomParser {
  #current: Building | undefined;
  readonly #onError: (err: OomError) => void;

  constructor(onError: (err: OomError) => void) {
    this.#onError = onError;
  }

  /** Feeds one record; returns the OOM kill it completes, if any. */
  feed(msg: KmsgMessage): OomInstance | undefined {
    const oom = this.#current;
    if (oom === undefined) {
      if (FIRST_LINE.test(msg.message)) {
        this.#current = {
          pid: 0,
          processName: '',
          timeOfDeathMs: msg.timestampMs,
          containerName: '/',
          victimContainerName: '/',
          constraint: '',
        };
      }
      return undefined;
    }
    const finished = this.#containerLine(msg.message, oom) || this.#lastLine(msg.message, oom);
    if (!finished) return undefined;
    oom.timeOfDeathMs = msg.timestampMs;
    this.#current = undefined;
    return { ...oom };
  }

  #containerLine(line: string, oom: Building): boolean {
    const m = CONTAINER.exec(line);
    if (m === null) {
      const legacy = LEGACY_CONTAINER.exec(line);
      if (legacy !== null) {
        oom.containerName = rooted(legacy[1] ?? '');
        oom.victimContainerName = rooted(legacy[2] ?? '');
      }
      return false;
    }
    oom.containerName = m[6] ?? '';
    oom.victimContainerName = m[5] ?? '';
    oom.constraint = m[1] ?? '';
    const pid = m[8] ?? '';
    if (!/^[+-]?\d+$/.test(pid)) {
      // Upstream reports the error; the line then does not end the kill.
      this.#onError(
        new OomError('BERTH_OOM_KMSG_MALFORMED', `Failed to parse OOM container name: "${pid}"`),
      );
      return false;
    }
    oom.pid = Number(pid);
    oom.processName = m[7] ?? '';
    return true;
  }

  #lastLine(line: string, oom: Building): boolean {
    const m = LAST_LINE.exec(line);
    if (m === null) return false;
    oom.pid = Number(m[1]);
    oom.processName = m[2] ?? '';
    return true;
  }
}

/** The SystemOOM event's text (oom_watcher_linux.go). */
export function systemOomMessage(oom: OomInstance): string {
  const base = 'System OOM encountered';
  return oom.processName !== '' && oom.pid !== 0
    ? `${base}, victim process: ${oom.processName}, pid: ${oom.pid}`
    : base;
}

/** Whether upstream reports the kill as a SystemOOM: the victim cgroup is the root. */
export function isSystemOom(oom: OomInstance): boolean {
  return oom.victimContainerName === '/';
}
