/** The container log manager's interface and settings (upstream pkg/kubelet/logs). */
import type { CriClient } from '../cri/index.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

/** Rotates the logs of running containers and removes a container's logs on request. */
export interface ContainerLogManager {
  /** Checks the logs every monitor interval until `signal` aborts; never rejects. */
  run(signal: AbortSignal): Promise<void>;
  /** One pass over the running containers (what each tick of `run` does). */
  rotateLogs(signal: AbortSignal): Promise<void>;
  /** Removes every log file of a container, rotated ones included (upstream Clean). */
  clean(containerId: string, signal: AbortSignal): Promise<void>;
}

/** containerLogMaxSize / MaxFiles / MaxWorkers / MonitorInterval, parsed. */
export interface LogRotatePolicy {
  /** Bytes; a live file at least this big is rotated. Negative disables rotation. */
  readonly maxSizeBytes: number;
  /** Files kept per container, the live one included (> 1). */
  readonly maxFiles: number;
  /** Containers rotated in parallel (>= 1). */
  readonly maxWorkers: number;
  readonly monitorIntervalMs: number;
}

export interface ContainerLogManagerDeps {
  readonly cri: CriClient;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The pod log root (podLogsDir): log paths outside it are never touched. */
  readonly podLogsDir: string;
}
