/**
 * A component process of the test cluster: spawned with an argv array, its output in
 * a log file, stopped with SIGTERM then SIGKILL after a grace period. Detached
 * processes (the demo) outlive the Node process that started them; their PIDs are
 * recorded so a later `stop` can find them.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ProcessSpec {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly logFile: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Keep running after this Node process exits (the demo). */
  readonly detached?: boolean;
}

export class ComponentProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  #exit: Promise<number | null> | undefined;

  private constructor(
    name: string,
    pid: number,
    logFile: string,
    exit: Promise<number | null> | undefined,
  ) {
    this.name = name;
    this.pid = pid;
    this.logFile = logFile;
    this.#exit = exit;
  }

  static start(spec: ProcessSpec): ComponentProcess {
    const fd = openSync(spec.logFile, 'a');
    try {
      const child = spawn(spec.command, spec.args, {
        stdio: ['ignore', fd, fd],
        env: spec.env ?? process.env,
        cwd: spec.cwd,
        detached: spec.detached === true,
      });
      if (child.pid === undefined)
        throw new Error(`Cannot start ${spec.name}: ${spec.command} did not spawn`);
      let exit: Promise<number | null> | undefined;
      if (spec.detached === true) {
        child.unref();
      } else {
        exit = new Promise((resolve) =>
          child.once('exit', (code) => {
            resolve(code);
          }),
        );
      }
      child.once('error', () => {
        /* reported through exit/alive checks */
      });
      return new ComponentProcess(spec.name, child.pid, spec.logFile, exit);
    } finally {
      closeSync(fd);
    }
  }

  /** Adopts a process started by an earlier run (demo stop). */
  static adopt(name: string, pid: number, logFile: string): ComponentProcess {
    return new ComponentProcess(name, pid, logFile, undefined);
  }

  alive(): boolean {
    return isAlive(this.pid);
  }

  /** The last lines of the log, for error messages. */
  async tail(lines = 20): Promise<string> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Idempotent. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.alive()) return;
    signal(this.pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (this.alive() && Date.now() < deadline) await sleep(50);
    if (this.alive()) signal(this.pid, 'SIGKILL');
    if (this.#exit !== undefined) await this.#exit;
    while (this.alive()) await sleep(20);
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

/** True while the PID exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // A zombie still answers kill(0); its state letter (after the command) is Z.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) !== 'Z';
  } catch {
    return false;
  }
}

/** Polls `check` until it resolves true; fails with `describe()` after `timeoutMs`. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  options: { timeoutMs: number; intervalMs?: number; describe?: () => Promise<string> },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    await sleep(options.intervalMs ?? 100);
  }
  const detail = options.describe !== undefined ? `\n${await options.describe()}` : '';
  const cause = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
  throw new Error(`Timed out after ${options.timeoutMs} ms waiting for ${what}${cause}${detail}`);
}
