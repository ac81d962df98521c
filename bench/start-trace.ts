/**
 * Where a pod's start time goes (`bench/pod-start.ts --trace`), read from the agents' own
 * logs. At verbosity 4 berth and the upstream kubelet both log upstream's kuberuntime
 * lines "Creating PodSandbox for pod" and "Created PodSandbox for pod" with
 * pod="<namespace>/<name>". With the create call's time and the moment a watch saw the
 * pod Running, each single pod's start splits into
 *
 *   toSandbox   create call -> Creating PodSandbox: API server, watch, admission, pod worker
 *   sandbox     Creating -> Created PodSandbox: the pod cgroup and RunPodSandbox (CNI)
 *   containers  Created PodSandbox -> Running seen: image check, container create/start,
 *               the status write and the watch that sees it
 *
 * so a slow start names the agent's phase (or the runtime's) that was slow.
 */
import { readFile } from 'node:fs/promises';

/** One measured single pod: wall-clock ms of the create call and of Running seen. */
export interface PodStartTimes {
  readonly name: string;
  readonly createdAtMs: number;
  readonly runningAtMs: number;
}

export interface StartPhases {
  readonly name: string;
  readonly totalMs: number;
  readonly toSandboxMs: number;
  readonly sandboxMs: number;
  readonly containersMs: number;
}

export interface StartTrace {
  /** Median of each phase over the pods found in the log. */
  readonly p50: Omit<StartPhases, 'name'>;
  /** The slowest pods, slowest first. */
  readonly slowest: readonly StartPhases[];
  /** Pods whose two sandbox lines were not both in the log. */
  readonly missing: number;
}

const CREATING = 'Creating PodSandbox for pod';
const CREATED = 'Created PodSandbox for pod';

/**
 * The wall-clock time of a log line, in either agent's format: berth's
 * `D 2026-12-07T05:12:24.475Z message k="v"` or klog's `I1207 05:12:24.475123 pid file:line]`
 * (local time, no year: the year of `now`).
 */
export function lineTime(line: string, now: Date): number | undefined {
  const berth = /^[DIWE] (\d{4}-\d\d-\d\dT[\d:.]+Z) /.exec(line);
  if (berth?.[1] !== undefined) return Date.parse(berth[1]);
  const klog = /^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,6}) /.exec(line);
  if (klog === null) return undefined;
  const n = klog.map(Number);
  const fracText = klog[6] ?? '0';
  const ms = (n[6] ?? 0) / 10 ** (fracText.length - 3);
  const month = (n[1] ?? 1) - 1;
  return new Date(now.getFullYear(), month, n[2], n[3], n[4], n[5], ms).getTime();
}

/** First "Creating" and first "Created" sandbox line per pod="namespace/name". */
export function sandboxTimes(
  logText: string,
  namespace: string,
  now: Date,
): Map<string, { creating?: number; created?: number }> {
  const byPod = new Map<string, { creating?: number; created?: number }>();
  for (const line of logText.split('\n')) {
    const kind = line.includes(CREATING) ? 'creating' : line.includes(CREATED) ? 'created' : null;
    if (kind === null) continue;
    const pod = /\bpod="([^"]+)"/.exec(line)?.[1];
    if (pod?.startsWith(`${namespace}/`) !== true) continue;
    const t = lineTime(line, now);
    if (t === undefined) continue;
    const name = pod.slice(namespace.length + 1);
    const entry = byPod.get(name) ?? {};
    entry[kind] ??= t;
    byPod.set(name, entry);
  }
  return byPod;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : (sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN);
}

/** The phases of each pod in `pods`, from the agent log at `logFile`. */
export async function traceStarts(
  logFile: string,
  namespace: string,
  pods: readonly PodStartTimes[],
  slowest = 3,
): Promise<StartTrace> {
  const times = sandboxTimes(await readFile(logFile, 'utf8'), namespace, new Date());
  const phases: StartPhases[] = [];
  let missing = 0;
  for (const p of pods) {
    const t = times.get(p.name);
    if (t?.creating === undefined || t.created === undefined) {
      missing++;
      continue;
    }
    const round = (v: number): number => Math.round(v);
    phases.push({
      name: p.name,
      totalMs: round(p.runningAtMs - p.createdAtMs),
      toSandboxMs: round(t.creating - p.createdAtMs),
      sandboxMs: round(t.created - t.creating),
      containersMs: round(p.runningAtMs - t.created),
    });
  }
  const p50 = (key: keyof Omit<StartPhases, 'name'>): number =>
    Math.round(median(phases.map((p) => p[key])));
  return {
    p50: {
      totalMs: p50('totalMs'),
      toSandboxMs: p50('toSandboxMs'),
      sandboxMs: p50('sandboxMs'),
      containersMs: p50('containersMs'),
    },
    slowest: [...phases].sort((a, b) => b.totalMs - a.totalMs).slice(0, slowest),
    missing,
  };
}

/** Markdown lines: per agent, the median pod and its slowest pods, phase by phase. */
export function traceTable(traces: readonly { agent: string; trace: StartTrace }[]): string {
  const lines = [
    '| agent | pod | total (ms) | create → sandbox (ms) | RunPodSandbox (ms) | sandbox → Running (ms) |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const { agent, trace } of traces) {
    const row = (pod: string, p: Omit<StartPhases, 'name'>): string =>
      `| ${agent} | ${pod} | ${String(p.totalMs)} | ${String(p.toSandboxMs)} | ${String(p.sandboxMs)} | ${String(p.containersMs)} |`;
    lines.push(row('p50 of each phase', trace.p50));
    for (const p of trace.slowest) lines.push(row(p.name, p));
  }
  return lines.join('\n');
}
