/**
 * Structured logging. Components receive a Logger and bind context with `child`
 * (pod, podUID, container), never a global. The pino implementation writes JSON or,
 * with format "text", one readable line per record.
 */
import { pino, type Logger as PinoLogger } from 'pino';

export interface LogFields {
  readonly [key: string]: unknown;
}

export interface Logger {
  error(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  /** Verbose detail, shown at --v >= 4 (upstream's klog V(4)). */
  debug(msg: string, fields?: LogFields): void;
  child(bindings: LogFields): Logger;
}

/**
 * klog's -v, shared by a logger and all its children and changeable while berth runs
 * (PUT /debug/flags/v). Records at debug level are written from verbosity 4 on.
 */
export class LogVerbosity {
  #value: number;
  constructor(value = 0) {
    this.#value = value;
  }
  get value(): number {
    return this.#value;
  }
  set(value: number): void {
    this.#value = value;
  }
}

class PinoAdapter implements Logger {
  readonly #p: PinoLogger;
  readonly #v: LogVerbosity;
  constructor(p: PinoLogger, v: LogVerbosity) {
    this.#p = p;
    this.#v = v;
  }
  error(msg: string, fields: LogFields = {}): void {
    this.#p.error(fields, msg);
  }
  warn(msg: string, fields: LogFields = {}): void {
    this.#p.warn(fields, msg);
  }
  info(msg: string, fields: LogFields = {}): void {
    this.#p.info(fields, msg);
  }
  debug(msg: string, fields: LogFields = {}): void {
    // Checked here, not by pino's level: a child keeps the level it was made with.
    if (this.#v.value >= 4) this.#p.debug(fields, msg);
  }
  child(bindings: LogFields): Logger {
    return new PinoAdapter(this.#p.child(bindings), this.#v);
  }
}

export interface LoggerOptions {
  /** klog-style verbosity: 0-3 info, >= 4 debug; a LogVerbosity to change it later. */
  readonly verbosity?: number | LogVerbosity;
  readonly format?: 'json' | 'text';
  /** Where records go (default stderr, as the kubelet logs). */
  readonly destination?: NodeJS.WritableStream;
}

function textLine(o: Record<string, unknown>): string {
  const { level, time, msg, ...rest } = o;
  const lvl =
    typeof level === 'number'
      ? ({ 10: 'T', 20: 'D', 30: 'I', 40: 'W', 50: 'E', 60: 'F' }[level] ?? '?')
      : '?';
  const ts = typeof time === 'number' ? new Date(time).toISOString() : '';
  const kv = Object.entries(rest)
    .filter(([k]) => k !== 'pid' && k !== 'hostname')
    .map(([k, v]) => {
      // JSON.stringify gives undefined for undefined and functions, whatever its type says.
      const text = JSON.stringify(v) as string | undefined;
      return `${k}=${text ?? 'undefined'}`;
    })
    .join(' ');
  return `${lvl} ${ts} ${String(msg)}${kv === '' ? '' : ` ${kv}`}\n`;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const dest = options.destination ?? process.stderr;
  const verbosity =
    options.verbosity instanceof LogVerbosity
      ? options.verbosity
      : new LogVerbosity(options.verbosity ?? 0);
  const stream =
    options.format === 'text'
      ? {
          write(line: string): void {
            dest.write(textLine(JSON.parse(line) as Record<string, unknown>));
          },
        }
      : dest;
  return new PinoAdapter(pino({ level: 'debug', base: null }, stream), verbosity);
}

export interface CapturedRecord {
  readonly level: 'error' | 'warn' | 'info' | 'debug';
  readonly msg: string;
  readonly fields: LogFields;
}

/** A logger for tests that keeps every record (with inherited bindings) in memory. */
export class MemoryLogger implements Logger {
  readonly records: CapturedRecord[];
  readonly #bindings: LogFields;
  constructor(records: CapturedRecord[] = [], bindings: LogFields = {}) {
    this.records = records;
    this.#bindings = bindings;
  }
  #push(level: CapturedRecord['level'], msg: string, fields: LogFields = {}): void {
    this.records.push({ level, msg, fields: { ...this.#bindings, ...fields } });
  }
  error(msg: string, fields?: LogFields): void {
    this.#push('error', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.#push('warn', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.#push('info', msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.#push('debug', msg, fields);
  }
  child(bindings: LogFields): Logger {
    return new MemoryLogger(this.records, { ...this.#bindings, ...bindings });
  }
}
