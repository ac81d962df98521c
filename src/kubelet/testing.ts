/**
 * Shared fixtures of the kubelet's unit tests: a fake host, the options of a test
 * node (with a fresh root directory) and a polling helper on the fake clock.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HostInfoProvider } from '../nodestatus/host-info.ts';
import type { FakeClock } from '../util/clock.ts';
import type { KubeletOptions } from './kubelet.ts';

export const host: HostInfoProvider = {
  capacity: () =>
    Promise.resolve({
      cpu: 2,
      memoryBytes: 8 * 1024 ** 3,
      ephemeralStorageBytes: 100 * 1024 ** 3,
      hugepages: {},
    }),
  systemInfo: () =>
    Promise.resolve({
      machineID: 'm',
      systemUUID: 'u',
      bootID: 'b',
      kernelVersion: '6.1',
      osImage: 'Debian',
      operatingSystem: 'linux',
      architecture: 'amd64',
    }),
};

/** Options of node `node-a`; rootDir is a new temporary directory (the caller removes it). */
export async function testKubeletOptions(): Promise<KubeletOptions> {
  return {
    nodeName: 'node-a',
    nodeIPs: ['127.0.0.1'],
    nodeLabels: {},
    registerWithTaints: [],
    podLogsDir: '/nonexistent/berth-test-logs',
    cgroupRoot: '/berth-unit',
    cgroupsPerQOS: true,
    maxPods: 110,
    kubeletPort: 10250,
    syncFrequencyMs: 60_000,
    nodeStatusUpdateFrequencyMs: 10_000,
    nodeStatusReportFrequencyMs: 300_000,
    nodeStatusMaxImages: 50,
    nodeLeaseDurationSeconds: 40,
    maxParallelImagePulls: 2,
    evictionMemoryBytes: 100 * 1024 ** 2,
    evictionNodefsFraction: 0.1,
    clusterDNS: [],
    clusterDomain: 'cluster.local',
    resolvConf: '/etc/resolv.conf',
    rootDir: await mkdtemp(join(tmpdir(), 'berth-kubelet-unit-')),
    cgroupDriver: 'cgroupfs',
    podPidsLimit: -1,
  };
}

/** How far the fake clock moves between two polls. */
const FAKE_STEP_MS = 100;

/**
 * Polls `fn` on the fake clock: between polls the clock moves FAKE_STEP_MS and the work
 * it woke runs. Fails once `limitMs` (default 60 s) of fake time passed without a value;
 * a test that must show a wake-up was not lost sets syncFrequency above that, so the
 * periodic resync cannot catch up what the wiring dropped.
 */
export async function untilOnClock<T>(
  clock: FakeClock,
  what: string,
  fn: () => Promise<T | undefined>,
  limitMs = 60_000,
): Promise<T> {
  for (let waited = 0; ; waited += FAKE_STEP_MS) {
    const v = await fn();
    if (v !== undefined) return v;
    if (waited >= limitMs) throw new Error(`Not reached after ${limitMs} ms of fake time: ${what}`);
    await clock.advance(FAKE_STEP_MS);
    // A real turn of the event loop (timers, I/O callbacks), so the file system and the
    // fakes' streams keep up with the fake time.
    await new Promise<void>((r) => setTimeout(r, 1));
  }
}
