/**
 * A component the fault tests kill and start again exactly as the harness started it:
 * the command line, environment and working directory are read from /proc before the
 * first kill, so containerd or kube-apiserver come back with the same config and log
 * file. Teardown needs nothing more: it kills whatever names the cluster root.
 */
import { readFile, readlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { ComponentProcess, isAlive } from '../harness/process.ts';

export class Restartable {
  readonly name: string;
  readonly logFile: string;
  #current: ComponentProcess;
  #argv: readonly string[] = [];
  #env: NodeJS.ProcessEnv = {};
  #cwd = '/';
  #captured = false;

  constructor(process: ComponentProcess) {
    this.name = process.name;
    this.logFile = process.logFile;
    this.#current = process;
  }

  get pid(): number {
    return this.#current.pid;
  }

  alive(): boolean {
    return this.#current.alive();
  }

  async #capture(): Promise<void> {
    if (this.#captured) return;
    const pid = this.#current.pid;
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    if (argv.at(-1) === '') argv.pop();
    const env: NodeJS.ProcessEnv = {};
    for (const kv of (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0')) {
      const eq = kv.indexOf('=');
      if (eq > 0) env[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
    if (argv.length === 0) throw new Error(`Cannot restart ${this.name}: pid ${pid} has no argv`);
    this.#argv = argv;
    this.#env = env;
    this.#cwd = await readlink(`/proc/${pid}/cwd`);
    this.#captured = true;
  }

  /** SIGKILL (the crash being tested) and wait until the PID is gone. */
  async kill(): Promise<void> {
    await this.#capture();
    const pid = this.#current.pid;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
    while (isAlive(pid)) await sleep(20);
  }

  /** SIGTERM with a grace period (an orderly stop). */
  async stop(graceMs = 30_000): Promise<void> {
    await this.#capture();
    await this.#current.stop(graceMs);
  }

  /** Starts it again with the captured command line; the caller waits for readiness. */
  async start(): Promise<void> {
    await this.#capture();
    if (this.#current.alive()) throw new Error(`Cannot start ${this.name}: pid ${this.pid} runs`);
    const [command, ...args] = this.#argv;
    if (command === undefined) throw new Error(`Cannot restart ${this.name}: empty argv`);
    this.#current = ComponentProcess.start({
      name: this.name,
      command,
      args,
      logFile: this.logFile,
      env: this.#env,
      cwd: this.#cwd,
    });
  }
}

/** user+system CPU seconds of a live process, from /proc/<pid>/stat (utime + stime). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command: state is field 3, utime field 14, stime field 15 (1-based).
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks / 100; // CLK_TCK is 100 on Linux x86_64
}
