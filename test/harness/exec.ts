/** Runs a program with an argv array (never a shell string) and returns its output. */
import { execFile } from 'node:child_process';

export interface RunOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
  /** Exit codes that are not failures (default: 0 only). */
  readonly okCodes?: readonly number[];
  readonly input?: string;
}

export class CommandError extends Error {
  readonly code = 'BERTH_COMMAND_FAILED';
  readonly argv: readonly string[];
  readonly exitCode: number | null;
  readonly stderr: string;

  constructor(argv: readonly string[], exitCode: number | null, stderr: string, cause: unknown) {
    super(`Command failed (exit ${String(exitCode)}): ${argv.join(' ')}\n${stderr.trim()}`, {
      cause,
    });
    this.name = 'CommandError';
    this.argv = argv;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

export async function run(
  file: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      {
        cwd: options.cwd,
        env: options.env,
        signal: options.signal,
        timeout: options.timeoutMs ?? 120_000,
        maxBuffer: 64 * 1024 * 1024,
        encoding: 'utf8',
      },
      (err, stdout, stderr) => {
        const exitCode = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        if (exitCode !== null && (options.okCodes ?? [0]).includes(exitCode)) {
          resolve({ stdout, stderr, exitCode });
        } else {
          reject(new CommandError([file, ...args], exitCode, stderr, err));
        }
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}
