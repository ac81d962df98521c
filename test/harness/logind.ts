/**
 * A real systemd-logind on a private system bus, for graceful node shutdown tests on a
 * host whose PID 1 is not systemd: a dbus-daemon of type "system" listening in the
 * test's directory, and Debian's systemd-logind in its own mount namespace (a tmpfs over
 * /run/systemd, the test's configuration bound over /etc/systemd) with CAP_SYS_BOOT
 * dropped from its bounding set, so it can never power the host off. logind is real:
 * the inhibitor locks, ListInhibitors and the delay limit are its own. It never sends
 * PrepareForShutdown itself here (PowerOff needs systemd), so tests send the signal
 * with dbus-send, as upstream's node e2e test does.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './exec.ts';
import { ComponentProcess, waitFor } from './process.ts';

const LOGIND = '/lib/systemd/systemd-logind';

export interface LogindOptions {
  /** logind.conf's InhibitDelayMaxSec (logind's default is 5). */
  readonly inhibitDelayMaxSec: number;
}

export interface Inhibitor {
  readonly what: string;
  readonly who: string;
  readonly why: string;
  readonly mode: string;
  readonly uid: number;
  readonly pid: number;
}

export interface Logind {
  /** DBUS_SYSTEM_BUS_ADDRESS for clients of this bus. */
  readonly address: string;
  /** Bound over /etc/systemd/logind.conf.d in logind's namespace (the drop-in directory). */
  readonly confDir: string;
  readonly env: NodeJS.ProcessEnv;
  /** logind's ListInhibitors. */
  listInhibitors(): Promise<Inhibitor[]>;
  /** InhibitDelayMaxUSec in microseconds. */
  inhibitDelayMaxUSec(): Promise<number>;
  /** dbus-send --system --type=signal /org/freedesktop/login1 Manager.PrepareForShutdown <args>. */
  sendPrepareForShutdown(...args: string[]): Promise<void>;
  /** Stops logind and the bus (idempotent); their mounts go with logind's namespace. */
  stop(): Promise<void>;
}

const BUS_CONFIG = (
  socket: string,
): string => `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=${socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_type="method_return"/>
    <allow send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="signal"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
  </policy>
  <!-- logind's own policy -->
  <includedir>/usr/share/dbus-1/system.d</includedir>
</busconfig>
`;

/** Parses busctl's text form of a(ssssuu). */
function parseInhibitors(out: string): Inhibitor[] {
  const tokens = [...out.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
  // a(ssssuu) N then N × 6 fields
  const n = Number(tokens[1]);
  const list: Inhibitor[] = [];
  for (let i = 0; i < n; i++) {
    const f = tokens.slice(2 + i * 6, 8 + i * 6);
    list.push({
      what: f[0] ?? '',
      who: f[1] ?? '',
      why: f[2] ?? '',
      mode: f[3] ?? '',
      uid: Number(f[4]),
      pid: Number(f[5]),
    });
  }
  return list;
}

export async function startLogind(dir: string, options: LogindOptions): Promise<Logind> {
  await mkdir(dir, { recursive: true });
  const socket = join(dir, 'system_bus_socket');
  const address = `unix:path=${socket}`;
  const env = { ...process.env, DBUS_SYSTEM_BUS_ADDRESS: address };
  const etc = join(dir, 'etc-systemd');
  const confDir = join(etc, 'logind.conf.d');
  await mkdir(confDir, { recursive: true });
  await writeFile(
    join(etc, 'logind.conf'),
    `[Login]\nInhibitDelayMaxSec=${options.inhibitDelayMaxSec}\n`,
  );
  await writeFile(join(dir, 'bus.conf'), BUS_CONFIG(socket));
  const started: ComponentProcess[] = [];
  const stop = async (): Promise<void> => {
    for (const p of started.reverse()) await p.stop(5000);
    started.length = 0;
  };
  try {
    const bus = ComponentProcess.start({
      name: 'dbus-daemon',
      command: 'dbus-daemon',
      args: [`--config-file=${join(dir, 'bus.conf')}`, '--nofork', '--nopidfile'],
      logFile: join(dir, 'dbus.log'),
    });
    started.push(bus);
    const busctl = async (...args: string[]): Promise<string> =>
      (await run('busctl', ['--system', ...args], { env, timeoutMs: 10_000 })).stdout;
    await waitFor(
      'the private system bus',
      async () => {
        await busctl('list', '--no-pager');
        return true;
      },
      { timeoutMs: 10_000, describe: () => bus.tail() },
    );
    // The mounts exist only in logind's namespace and end with it.
    const script = [
      'set -e',
      'mount -t tmpfs tmpfs /run/systemd',
      `mount --bind ${etc} /etc/systemd`,
      `exec setpriv --bounding-set=-sys_boot --inh-caps=-sys_boot ${LOGIND}`,
    ].join('\n');
    const logind = ComponentProcess.start({
      name: 'systemd-logind',
      command: 'unshare',
      args: ['--mount', '--propagation', 'private', 'sh', '-c', script],
      logFile: join(dir, 'logind.log'),
      env,
    });
    started.push(logind);
    const property = async (): Promise<number> => {
      const out = await busctl(
        'get-property',
        'org.freedesktop.login1',
        '/org/freedesktop/login1',
        'org.freedesktop.login1.Manager',
        'InhibitDelayMaxUSec',
      );
      return Number(out.trim().split(/\s+/)[1]);
    };
    await waitFor('systemd-logind on the private bus', async () => (await property()) > 0, {
      timeoutMs: 15_000,
      describe: () => logind.tail(),
    });
    return {
      address,
      confDir,
      env,
      inhibitDelayMaxUSec: property,
      listInhibitors: async () =>
        parseInhibitors(
          await busctl(
            'call',
            'org.freedesktop.login1',
            '/org/freedesktop/login1',
            'org.freedesktop.login1.Manager',
            'ListInhibitors',
          ),
        ),
      sendPrepareForShutdown: async (...args) => {
        await run(
          'dbus-send',
          [
            '--system',
            '--type=signal',
            '/org/freedesktop/login1',
            'org.freedesktop.login1.Manager.PrepareForShutdown',
            ...args,
          ],
          { env, timeoutMs: 10_000 },
        );
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
