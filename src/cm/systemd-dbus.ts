/**
 * systemd's manager (org.freedesktop.systemd1) over the system bus, the part of it a
 * cgroup driver needs: the calls runc's libcontainer systemd manager makes through
 * go-systemd (StartTransientUnit, StopUnit, SetUnitProperties, ResetFailedUnit, the
 * Version property), on @jellybrick/dbus-next as the node shutdown manager uses it.
 *
 * A unit's start and stop are jobs: the method answers with the job's object path
 * and systemd announces its end with the JobRemoved signal (its result: "done",
 * "failed", "canceled", "timeout", "dependency", "skipped"). The connection subscribes
 * once, and results that arrive before the caller waits for them are kept briefly:
 * the signal can be decoded in the same chunk as the method's reply.
 *
 * The connection is made at the first call and dropped when it fails, so the next call
 * connects again (upstream's retryOnDisconnect): systemd restarting its bus (daemon
 * re-exec) costs one failed call, not the node.
 */
import type { EventEmitter } from 'node:events';
import {
  DBusError,
  Message,
  MessageType,
  systemBus,
  Variant,
  type MessageBus,
} from '@jellybrick/dbus-next';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { CgroupError } from './types.ts';

/** A unit property as systemd's a(sv) takes it; the D-Bus type is explicit. */
export type UnitProperty =
  | { readonly name: string; readonly type: 't'; readonly value: bigint }
  | { readonly name: string; readonly type: 'b'; readonly value: boolean }
  | { readonly name: string; readonly type: 's'; readonly value: string }
  | { readonly name: string; readonly type: 'as'; readonly value: readonly string[] };

/** How a start or stop job ended, or why there was none. */
export type JobResult =
  | 'done'
  | 'canceled'
  | 'timeout'
  | 'failed'
  | 'dependency'
  | 'skipped'
  /** StartTransientUnit: a unit of that name is already loaded. */
  | 'exists'
  /** StopUnit: no unit of that name is loaded. */
  | 'missing';

/** The calls of systemd's manager interface the cgroup driver makes. */
export interface SystemdBus {
  /** StartTransientUnit(name, mode, properties, []), then its job's result. */
  startTransientUnit(
    name: string,
    mode: 'replace' | 'fail',
    properties: readonly UnitProperty[],
    signal: AbortSignal,
  ): Promise<JobResult>;
  /** StopUnit(name, mode), then its job's result. */
  stopUnit(name: string, mode: 'replace' | 'fail', signal: AbortSignal): Promise<JobResult>;
  /** SetUnitProperties(name, runtime, properties). */
  setUnitProperties(
    name: string,
    runtime: boolean,
    properties: readonly UnitProperty[],
    signal: AbortSignal,
  ): Promise<void>;
  /** ResetFailedUnit(name): a failed unit is forgotten so its name can be used again. */
  resetFailedUnit(name: string, signal: AbortSignal): Promise<void>;
  /** The Version property as a number ("252.39-1~deb12u1" -> 252); -1 when unreadable. */
  version(signal: AbortSignal): Promise<number>;
  close(): void;
}

const SYSTEMD = 'org.freedesktop.systemd1';
const SYSTEMD_PATH = '/org/freedesktop/systemd1';
const MANAGER = 'org.freedesktop.systemd1.Manager';
const CALL_TIMEOUT_MS = 10_000;
/** Upstream waits 30 s for a unit's job (startUnit/stopUnit). */
const JOB_TIMEOUT_MS = 30_000;
const KEPT_RESULTS = 256;

/** Upstream's systemdVersionAtoi: the leading number of "v245.4-1.fc32", "252", ... */
export function parseSystemdVersion(text: string): number {
  const m = /^[\s"v]*(\d+)/.exec(text);
  return m?.[1] === undefined ? -1 : Number(m[1]);
}

/** The D-Bus form of a property list (signature a(sv)). */
export function toDbusProperties(properties: readonly UnitProperty[]): [string, Variant][] {
  return properties.map((p) => [p.name, new Variant(p.type, p.value)]);
}

function describe(err: unknown): string {
  if (err instanceof DBusError) return `${err.type}: ${err.text}`;
  return err instanceof Error ? err.message : String(err);
}

export interface DbusSystemdOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Connects to the bus; default: the system bus (DBUS_SYSTEM_BUS_ADDRESS or the standard socket). */
  readonly connect?: () => MessageBus;
}

interface Connection {
  readonly bus: MessageBus;
  /** Rejects every call in flight when the connection fails. */
  readonly onFailure: Set<(err: Error) => void>;
  failed: Error | undefined;
  /** Job path -> result, for JobRemoved signals nobody waited for yet. */
  readonly results: Map<string, string>;
  readonly waiters: Map<string, (result: string) => void>;
  subscribed: Promise<void> | undefined;
}

export class DbusSystemd implements SystemdBus {
  readonly #o: DbusSystemdOptions;
  #conn: Connection | undefined;
  #version: number | undefined;
  #closed = false;

  /** Assigns only: the connection is made by the first call. */
  constructor(options: DbusSystemdOptions) {
    this.#o = options;
  }

  #connection(): Connection {
    if (this.#closed)
      throw new CgroupError('Cannot call systemd: the bus connection was closed', {
        code: 'BERTH_CGROUP_SYSTEMD_BUS',
      });
    if (this.#conn !== undefined && this.#conn.failed === undefined) return this.#conn;
    const bus = (this.#o.connect ?? systemBus)();
    const conn: Connection = {
      bus,
      onFailure: new Set(),
      failed: undefined,
      results: new Map(),
      waiters: new Map(),
      subscribed: undefined,
    };
    const fail = (err: Error): void => {
      if (conn.failed !== undefined) return;
      conn.failed = err;
      this.#o.logger.warn('systemd bus connection failed; the next call connects again', {
        err: describe(err),
      });
      for (const f of [...conn.onFailure]) f(err);
      bus.disconnect();
    };
    // 'error' is missing from the library's event map, though it emits it.
    (bus as unknown as EventEmitter).on('error', (err: unknown) => {
      fail(err instanceof Error ? err : new Error(String(err)));
    });
    // The library reports a closed socket only on its connection object.
    const socket = (bus as unknown as { _connection?: EventEmitter })._connection;
    socket?.on('end', () => {
      fail(new Error('the system bus closed the connection'));
    });
    bus.on('message', (msg: Message) => {
      if (msg.type !== MessageType.SIGNAL || msg.interface !== MANAGER) return;
      if (msg.member !== 'JobRemoved') return;
      const [, job, , result] = msg.body as [unknown, unknown, unknown, unknown];
      if (typeof job !== 'string' || typeof result !== 'string') return;
      const waiter = conn.waiters.get(job);
      if (waiter !== undefined) {
        waiter(result);
        return;
      }
      conn.results.set(job, result);
      if (conn.results.size > KEPT_RESULTS) {
        const oldest = conn.results.keys().next().value;
        if (oldest !== undefined) conn.results.delete(oldest);
      }
    });
    this.#conn = conn;
    return conn;
  }

  /** One method call, bounded by CALL_TIMEOUT_MS, the caller's signal and the connection. */
  async #call(conn: Connection, msg: Message, signal: AbortSignal): Promise<Message> {
    if (conn.failed !== undefined) throw conn.failed;
    signal.throwIfAborted();
    const timeout = new AbortController();
    let onFailure: (err: Error) => void = () => undefined;
    let onAbort = (): void => undefined;
    try {
      const failed = new Promise<never>((_, reject) => {
        onFailure = reject;
        onAbort = () => {
          reject(signal.reason as Error);
        };
      });
      conn.onFailure.add(onFailure);
      signal.addEventListener('abort', onAbort, { once: true });
      const timer = this.#o.clock.sleep(CALL_TIMEOUT_MS, timeout.signal).then(() => {
        throw new Error(`no answer from systemd in ${CALL_TIMEOUT_MS / 1000}s`);
      });
      timer.catch(() => undefined);
      const reply = await Promise.race([conn.bus.call(msg), failed, timer]);
      if (reply === null) throw new Error('no reply from systemd');
      return reply;
    } finally {
      timeout.abort();
      conn.onFailure.delete(onFailure);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Subscribe, so systemd sends JobRemoved to this connection; once per connection. */
  async #subscribed(conn: Connection, signal: AbortSignal): Promise<void> {
    conn.subscribed ??= (async () => {
      const rule = `type='signal',sender='${SYSTEMD}',interface='${MANAGER}',member='JobRemoved',path='${SYSTEMD_PATH}'`;
      await this.#call(
        conn,
        new Message({
          destination: 'org.freedesktop.DBus',
          path: '/org/freedesktop/DBus',
          interface: 'org.freedesktop.DBus',
          member: 'AddMatch',
          signature: 's',
          body: [rule],
        }),
        signal,
      );
      await this.#call(conn, this.#manager('Subscribe'), signal);
    })();
    try {
      await conn.subscribed;
    } catch (err) {
      conn.subscribed = undefined;
      throw err;
    }
  }

  #manager(member: string, signature?: string, body?: unknown[]): Message {
    return new Message({
      destination: SYSTEMD,
      path: SYSTEMD_PATH,
      interface: MANAGER,
      member,
      ...(signature !== undefined && { signature }),
      ...(body !== undefined && { body }),
    });
  }

  /** Runs `op` against a live connection and turns failures into typed errors. */
  async #op<T>(
    what: string,
    signal: AbortSignal,
    op: (conn: Connection) => Promise<T>,
  ): Promise<T> {
    try {
      return await op(this.#connection());
    } catch (err) {
      if (signal.aborted || err instanceof CgroupError) throw err;
      throw new CgroupError(`Cannot ${what}: ${describe(err)}`, {
        code: 'BERTH_CGROUP_SYSTEMD_BUS',
        cause: err,
        ...(err instanceof DBusError && { dbusError: err.type }),
      });
    }
  }

  /** The job's result: from JobRemoved, or kept from before the caller asked. */
  async #jobResult(
    conn: Connection,
    job: string,
    unit: string,
    signal: AbortSignal,
  ): Promise<string> {
    const kept = conn.results.get(job);
    if (kept !== undefined) {
      conn.results.delete(job);
      return kept;
    }
    const timeout = new AbortController();
    let onFailure: (err: Error) => void = () => undefined;
    let onAbort = (): void => undefined;
    try {
      const ended = new Promise<string>((resolve, reject) => {
        conn.waiters.set(job, resolve);
        onFailure = reject;
        onAbort = () => {
          reject(signal.reason as Error);
        };
      });
      conn.onFailure.add(onFailure);
      signal.addEventListener('abort', onAbort, { once: true });
      const timer = this.#o.clock.sleep(JOB_TIMEOUT_MS, timeout.signal).then(() => {
        throw new CgroupError(`Timeout waiting for systemd to finish the job of ${unit}`, {
          code: 'BERTH_CGROUP_SYSTEMD_UNIT',
        });
      });
      timer.catch(() => undefined);
      return await Promise.race([ended, timer]);
    } finally {
      timeout.abort();
      conn.waiters.delete(job);
      conn.onFailure.delete(onFailure);
      signal.removeEventListener('abort', onAbort);
    }
  }

  startTransientUnit(
    name: string,
    mode: 'replace' | 'fail',
    properties: readonly UnitProperty[],
    signal: AbortSignal,
  ): Promise<JobResult> {
    return this.#op(`start systemd unit ${name}`, signal, async (conn) => {
      await this.#subscribed(conn, signal);
      let reply: Message;
      try {
        reply = await this.#call(
          conn,
          this.#manager('StartTransientUnit', 'ssa(sv)a(sa(sv))', [
            name,
            mode,
            toDbusProperties(properties),
            [],
          ]),
          signal,
        );
      } catch (err) {
        if (err instanceof DBusError && err.type === `${SYSTEMD}.UnitExists`) return 'exists';
        throw err;
      }
      return (await this.#jobResult(conn, String(reply.body[0]), name, signal)) as JobResult;
    });
  }

  stopUnit(name: string, mode: 'replace' | 'fail', signal: AbortSignal): Promise<JobResult> {
    return this.#op(`stop systemd unit ${name}`, signal, async (conn) => {
      await this.#subscribed(conn, signal);
      let reply: Message;
      try {
        reply = await this.#call(conn, this.#manager('StopUnit', 'ss', [name, mode]), signal);
      } catch (err) {
        if (err instanceof DBusError && err.type === `${SYSTEMD}.NoSuchUnit`) return 'missing';
        throw err;
      }
      return (await this.#jobResult(conn, String(reply.body[0]), name, signal)) as JobResult;
    });
  }

  setUnitProperties(
    name: string,
    runtime: boolean,
    properties: readonly UnitProperty[],
    signal: AbortSignal,
  ): Promise<void> {
    return this.#op(`set the properties of systemd unit ${name}`, signal, async (conn) => {
      await this.#call(
        conn,
        this.#manager('SetUnitProperties', 'sba(sv)', [
          name,
          runtime,
          toDbusProperties(properties),
        ]),
        signal,
      );
    });
  }

  resetFailedUnit(name: string, signal: AbortSignal): Promise<void> {
    return this.#op(`reset failed systemd unit ${name}`, signal, async (conn) => {
      await this.#call(conn, this.#manager('ResetFailedUnit', 's', [name]), signal);
    });
  }

  async version(signal: AbortSignal): Promise<number> {
    if (this.#version !== undefined) return this.#version;
    try {
      const reply = await this.#op('read the systemd version', signal, (conn) =>
        this.#call(
          conn,
          new Message({
            destination: SYSTEMD,
            path: SYSTEMD_PATH,
            interface: 'org.freedesktop.DBus.Properties',
            member: 'Get',
            signature: 'ss',
            body: [MANAGER, 'Version'],
          }),
          signal,
        ),
      );
      const variant = reply.body[0] as { value?: unknown } | undefined;
      const text = variant?.value;
      this.#version = typeof text === 'string' ? parseSystemdVersion(text) : -1;
    } catch (err) {
      if (signal.aborted) throw err;
      // Upstream logs and treats the version as unknown (-1) from then on.
      this.#o.logger.error('Unable to get systemd version', { err: describe(err) });
      this.#version = -1;
    }
    return this.#version;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = undefined;
    if (conn === undefined) return;
    for (const f of [...conn.onFailure]) f(new Error('closed'));
    if (conn.failed === undefined) conn.bus.disconnect();
  }
}
