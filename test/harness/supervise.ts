/**
 * Restarts a command whenever it exits, the way a DaemonSet restarts kube-proxy:
 *   node supervise.ts <command> [args...]
 * kube-proxy exits by design when its Node object appears, changes IPs or is deleted,
 * and the node of a test cluster registers only after kube-proxy started. SIGTERM (or
 * SIGINT) is passed on to the command and ends the loop, so stopping this process stops
 * both. A separate process, so detached clusters (the demo) keep it.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  process.stderr.write('usage: supervise.ts <command> [args...]\n');
  process.exit(2);
}
const RESTART_DELAY_MS = 1000;
let child: ChildProcess | undefined;
let stopping = false;

function log(message: string): void {
  process.stderr.write(`supervise: ${new Date().toISOString()} ${message}\n`);
}

function start(cmd: string): void {
  const c = spawn(cmd, args, { stdio: 'inherit' });
  child = c;
  c.once('error', (err) => {
    log(`cannot start ${cmd}: ${err.message}`);
  });
  c.once('exit', (code, signal) => {
    child = undefined;
    if (stopping) {
      process.exit(0);
    }
    log(`${cmd} exited (code ${String(code)}, signal ${String(signal)}); restarting`);
    setTimeout(() => {
      if (!stopping) start(cmd);
    }, RESTART_DELAY_MS);
  });
}

for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    stopping = true;
    if (child === undefined) process.exit(0);
    child.kill(sig);
  });
}
start(command);
