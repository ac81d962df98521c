/**
 * logind over the system bus (upstream's systemd/inhibit_linux.go), on
 * @jellybrick/dbus-next (the maintained fork of dbus-next; pure JavaScript).
 *
 * One part differs in how, not what: logind's Inhibit returns the lock as a file
 * descriptor passed over the socket (SCM_RIGHTS), and Node's sockets cannot receive
 * descriptors without a native addon. So the lock is taken by `systemd-inhibit` (same
 * package as logind, so present wherever logind is), with the same what/who/why/mode,
 * holding the descriptor for berth: it runs `cat` on a pipe from berth, so the lock
 * ends when berth releases it (closes the pipe) or dies. Berth confirms the lock through
 * logind's ListInhibitors before reporting it held.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Message, MessageType, systemBus, type MessageBus } from '@jellybrick/dbus-next';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';
import { NodeShutdownError, type InhibitBus, type InhibitLock } from './types.ts';

const LOGIND_SERVICE = 'org.freedesktop.login1';
const LOGIND_OBJECT = '/org/freedesktop/login1';
const LOGIND_INTERFACE = 'org.freedesktop.login1.Manager';
const CALL_TIMEOUT_MS = 10_000;
const INHIBIT_WHO = 'kubelet';
const INHIBIT_WHY = 'Kubelet needs time to handle node shutdown';

/** Upstream writes /etc/systemd/logind.conf.d/99-kubelet.conf. */
export const LOGIND_CONFIG_DIRECTORY = '/etc/systemd/logind.conf.d';
const KUBELET_LOGIND_CONF = '99-kubelet.conf';

export interface LogindBusOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Where the InhibitDelayMaxSec drop-in goes (LOGIND_CONFIG_DIRECTORY on a node). */
  readonly logindConfigDirectory?: string;
  /** The systemd-inhibit binary (default: found on PATH). */
  readonly systemdInhibit?: string;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class LogindBus implements InhibitBus {
  readonly #o: LogindBusOptions;
  readonly #bus: MessageBus;
  /** The first connection error; every call after it fails at once. */
  #failed: Error | undefined;
  #closed = false;
  readonly #onFailure = new Set<(err: Error) => void>();

  /** Connects to DBUS_SYSTEM_BUS_ADDRESS (or the standard socket). */
  static connect(options: LogindBusOptions): LogindBus {
    return new LogindBus(options, systemBus());
  }

  private constructor(options: LogindBusOptions, bus: MessageBus) {
    this.#o = options;
    this.#bus = bus;
    const fail = (err: Error): void => {
      this.#failed ??= err;
      for (const f of [...this.#onFailure]) f(err);
    };
    // 'error' is missing from the library's event map, though it emits it.
    (this.#bus as unknown as EventEmitter).on('error', (err: unknown) => {
      // A malformed message also lands here: the library could not decode it.
      this.#o.logger.error('D-Bus connection error', { err: describe(err) });
      fail(err instanceof Error ? err : new Error(String(err)));
    });
    // The library reports a closed socket only on its connection object.
    const connection = (this.#bus as unknown as { _connection?: EventEmitter })._connection;
    connection?.on('end', () => {
      fail(new Error('the system bus closed the connection'));
    });
  }

  async #call(msg: Message, signal: AbortSignal): Promise<Message> {
    if (this.#failed !== undefined) throw this.#failed;
    let onFailure: (err: Error) => void = () => undefined;
    let onAbort = (): void => undefined;
    const timeout = new AbortController();
    try {
      const failed = new Promise<never>((_, reject) => {
        onFailure = reject;
        onAbort = () => {
          reject(signal.reason as Error);
        };
      });
      this.#onFailure.add(onFailure);
      signal.addEventListener('abort', onAbort, { once: true });
      const timer = this.#o.clock.sleep(CALL_TIMEOUT_MS, timeout.signal).then(() => {
        throw new Error(`no answer from the system bus in ${CALL_TIMEOUT_MS / 1000}s`);
      });
      timer.catch(() => undefined);
      const reply = await Promise.race([this.#bus.call(msg), failed, timer]);
      if (reply === null) throw new Error('no reply');
      return reply;
    } finally {
      timeout.abort();
      this.#onFailure.delete(onFailure);
      signal.removeEventListener('abort', onAbort);
    }
  }

  async currentInhibitDelayMs(signal: AbortSignal): Promise<number> {
    let reply: Message;
    try {
      reply = await this.#call(
        new Message({
          destination: LOGIND_SERVICE,
          path: LOGIND_OBJECT,
          interface: 'org.freedesktop.DBus.Properties',
          member: 'Get',
          signature: 'ss',
          body: [LOGIND_INTERFACE, 'InhibitDelayMaxUSec'],
        }),
        signal,
      );
    } catch (err) {
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_BUS',
        `failed reading InhibitDelayMaxUSec property from logind: ${describe(err)}`,
        { cause: err },
      );
    }
    const variant = reply.body[0] as { signature?: unknown; value?: unknown } | undefined;
    const value = variant?.value;
    if (variant?.signature !== 't' || (typeof value !== 'bigint' && typeof value !== 'number')) {
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_BUS',
        'InhibitDelayMaxUSec from logind is not a uint64 as expected',
      );
    }
    // Microseconds.
    return Number(value) / 1000;
  }

  async inhibitShutdown(signal: AbortSignal): Promise<InhibitLock> {
    const child = spawn(
      this.#o.systemdInhibit ?? 'systemd-inhibit',
      ['--what=shutdown', `--who=${INHIBIT_WHO}`, `--why=${INHIBIT_WHY}`, '--mode=delay', 'cat'],
      { stdio: ['pipe', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr = (stderr + d).slice(-2000);
    });
    const exited = new Promise<number | null>((resolve) => {
      child.once('error', (err) => {
        stderr += describe(err);
        resolve(-1);
      });
      child.once('exit', (code) => {
        resolve(code);
      });
    });
    child.stdin.on('error', () => undefined);
    try {
      await this.#waitForLock(child, exited, signal);
    } catch (err) {
      await stopInhibitor(child, exited);
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_INHIBIT',
        `failed creating systemd inhibitor: ${describe(err)}${stderr === '' ? '' : `: ${stderr.trim()}`}`,
        { cause: err },
      );
    }
    let released: Promise<void> | undefined;
    return {
      release: () => (released ??= stopInhibitor(child, exited)),
    };
  }

  /** Resolves once logind lists a delay lock of `child`'s pid; rejects if it exits first. */
  async #waitForLock(
    child: ChildProcess,
    exited: Promise<number | null>,
    signal: AbortSignal,
  ): Promise<void> {
    let exitCode: number | null | undefined;
    void exited.then((c) => {
      exitCode = c;
    });
    for (let waited = 0; waited < CALL_TIMEOUT_MS; waited += 50) {
      if (exitCode !== undefined)
        throw new Error(`systemd-inhibit exited with ${String(exitCode)}`);
      const reply = await this.#call(
        new Message({
          destination: LOGIND_SERVICE,
          path: LOGIND_OBJECT,
          interface: LOGIND_INTERFACE,
          member: 'ListInhibitors',
        }),
        signal,
      );
      const list = (reply.body[0] ?? []) as unknown[][];
      if (list.some((l) => l[1] === INHIBIT_WHO && l[3] === 'delay' && l[5] === child.pid)) return;
      await this.#o.clock.sleep(50, signal);
    }
    throw new Error('the lock did not appear in ListInhibitors');
  }

  async reloadLogindConf(signal: AbortSignal): Promise<void> {
    try {
      await this.#call(
        new Message({
          destination: 'org.freedesktop.systemd1',
          path: '/org/freedesktop/systemd1',
          interface: 'org.freedesktop.systemd1.Manager',
          member: 'KillUnit',
          signature: 'ssi',
          // SIGHUP: logind reads its configuration again.
          body: ['systemd-logind.service', 'all', 1],
        }),
        signal,
      );
    } catch (err) {
      throw new NodeShutdownError(
        'BERTH_NODE_SHUTDOWN_DELAY',
        `unable to reload logind conf: ${describe(err)}`,
        { cause: err },
      );
    }
  }

  async overrideInhibitDelay(delayMs: number): Promise<void> {
    const dir = this.#o.logindConfigDirectory ?? LOGIND_CONFIG_DIRECTORY;
    try {
      await mkdir(dir, { recursive: true, mode: 0o755 });
    } catch (err) {
      throw new Error(`failed creating ${dir} directory: ${describe(err)}`, { cause: err });
    }
    const path = join(dir, KUBELET_LOGIND_CONF);
    // logind.conf's InhibitDelayMaxSec is the InhibitDelayMaxUSec property, in seconds.
    const body = `# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=${Math.round(delayMs / 1000)}\n`;
    try {
      await writeFile(path, body, { mode: 0o644 });
    } catch (err) {
      throw new Error(
        `failed writing logind shutdown inhibit override file ${path}: ${describe(err)}`,
        { cause: err },
      );
    }
  }

  async monitorShutdown(
    onEvent: (shuttingDown: boolean) => void,
    onClosed: () => void,
  ): Promise<void> {
    const rule = `type='signal',interface='${LOGIND_INTERFACE}',member='PrepareForShutdown',path='${LOGIND_OBJECT}'`;
    await this.#call(
      new Message({
        destination: 'org.freedesktop.DBus',
        path: '/org/freedesktop/DBus',
        interface: 'org.freedesktop.DBus',
        member: 'AddMatch',
        signature: 's',
        body: [rule],
      }),
      AbortSignal.timeout(CALL_TIMEOUT_MS),
    );
    const logger = this.#o.logger;
    this.#bus.on('message', (msg: Message) => {
      if (
        msg.type !== MessageType.SIGNAL ||
        msg.interface !== LOGIND_INTERFACE ||
        msg.member !== 'PrepareForShutdown' ||
        msg.path !== LOGIND_OBJECT
      )
        return;
      if (msg.body.length === 0) {
        logger.error('Failed obtaining shutdown event, PrepareForShutdown event was empty');
        return;
      }
      const active = msg.body[0];
      if (typeof active !== 'boolean') {
        logger.error(
          'Failed obtaining shutdown event, PrepareForShutdown event was not bool type as expected',
          { signature: msg.signature, sender: msg.sender },
        );
        return;
      }
      onEvent(active);
    });
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      this.#onFailure.delete(end);
      onClosed();
    };
    if (this.#failed !== undefined || this.#closed) end();
    else this.#onFailure.add(end);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#bus.disconnect();
    for (const f of [...this.#onFailure]) f(new Error('closed'));
  }
}

/** Ends the inhibitor: EOF on cat's stdin ends it and systemd-inhibit, closing the lock. */
async function stopInhibitor(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  child.stdin?.end();
  const timer = setTimeout(() => {
    child.kill('SIGKILL');
  }, 5000);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}
