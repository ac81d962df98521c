/**
 * The commands the CRI contract runs in busybox, and what each does there. A real
 * runtime runs them; the fake runtime is scripted from this table (onStart / onExec),
 * so the contract's assertions are the same for both and the table is the one place
 * that states what busybox does.
 */
import type { FakeExecOutcome, FakeStartOutcome } from '../../src/cri/fake/index.ts';

/** A container command of the contract and what busybox does with it. */
export interface ContractProgram {
  readonly command: readonly string[];
  /** What it prints right after starting, in order. */
  readonly output: readonly {
    readonly stream: 'stdout' | 'stderr';
    readonly text: string;
    /** The output does not end its line (a partial CRI record). */
    readonly partial?: boolean;
  }[];
  /** It exits by itself with this code; absent: it runs until stopped. */
  readonly exitCode?: number;
  /** Its exit code when stopped with a grace period; absent: it dies of SIGTERM (143). */
  readonly stopExitCode?: number;
  /** The entrypoint does not exist, so StartContainer fails. */
  readonly startError?: true;
}

/** The container programs the contract runs, by role. */
export const PROGRAMS = {
  greeter: {
    command: ['sh', '-c', 'echo hello from berth; echo oops >&2; exec sleep 3600'],
    output: [
      { stream: 'stdout', text: 'hello from berth' },
      { stream: 'stderr', text: 'oops' },
    ],
  },
  sleeper: { command: ['sleep', '3600'], output: [] },
  failing: {
    command: ['sh', '-c', 'echo giving up; exit 3'],
    output: [{ stream: 'stdout', text: 'giving up' }],
    exitCode: 3,
  },
  succeeding: { command: ['true'], output: [], exitCode: 0 },
  // Output without a final newline: the runtime logs it as a partial (P) record.
  unterminated: {
    command: ['sh', '-c', 'printf "no newline"; exit 0'],
    output: [{ stream: 'stdout', text: 'no newline', partial: true }],
    exitCode: 0,
  },
  // Prints "ready" once the trap is installed, so a test can wait before stopping it.
  graceful: {
    command: ['sh', '-c', 'trap "exit 0" TERM; echo ready; while true; do sleep 0.1; done'],
    output: [{ stream: 'stdout', text: 'ready' }],
    stopExitCode: 0,
  },
  missingEntrypoint: { command: ['/berth/does-not-exist'], output: [], startError: true },
} as const satisfies Record<string, ContractProgram>;

/** An ExecSync command of the contract and what busybox answers. */
export interface ContractExec {
  readonly cmd: readonly string[];
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
  /** How long it runs, for commands meant to outlast ExecSync's timeout. */
  readonly durationMs?: number;
}

/** The ExecSync commands the contract runs, by role. */
export const EXECS = {
  arithmetic: {
    cmd: ['sh', '-c', 'echo $((6 * 7)); echo to-stderr >&2; exit 3'],
    stdout: '42\n',
    stderr: 'to-stderr\n',
    exitCode: 3,
  },
  slow: { cmd: ['sleep', '5'], stdout: '', stderr: '', exitCode: 0, durationMs: 5000 },
} as const satisfies Record<string, ContractExec>;

function sameCommand(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((part, i) => part === b[i]);
}

/** The fake's start script for the contract's programs (unknown commands keep running). */
export function startOutcomeFor(command: readonly string[]): FakeStartOutcome | undefined {
  const program: ContractProgram | undefined = Object.values(PROGRAMS).find((p) =>
    sameCommand(p.command, command),
  );
  if (program === undefined) return undefined;
  return {
    output: program.output,
    ...(program.exitCode !== undefined && { exitCode: program.exitCode }),
    ...(program.stopExitCode !== undefined && { stopExitCode: program.stopExitCode }),
    ...(program.startError === true && {
      startError: `exec: "${command[0] ?? ''}": stat ${command[0] ?? ''}: no such file or directory`,
    }),
  };
}

/** The fake's exec script for the contract's commands (unknown commands print nothing). */
export function execOutcomeFor(cmd: readonly string[]): FakeExecOutcome {
  const exec: ContractExec | undefined = Object.values(EXECS).find((e) => sameCommand(e.cmd, cmd));
  if (exec === undefined) return {};
  return {
    stdout: exec.stdout,
    stderr: exec.stderr,
    exitCode: exec.exitCode,
    ...(exec.durationMs !== undefined && { durationMs: exec.durationMs }),
  };
}
