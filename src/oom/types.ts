/**
 * The OOM watcher (upstream's pkg/kubelet/oom with cadvisor's oomparser): the kernel log
 * (/dev/kmsg) is followed, each OOM kill is parsed from its "invoked oom-killer:" line to
 * the line naming the victim, and a kill outside any container's own memory limit (the
 * kernel's global OOM killer, victim cgroup "/") becomes a SystemOOM Warning event on
 * the Node. A kill inside a cgroup limit (a container hitting its own limit) is the
 * container's OOMKilled status, never a SystemOOM.
 */
import { BerthError } from '../util/errors.ts';

/** One /dev/kmsg record (kmsgparser.Message). */
export interface KmsgMessage {
  readonly priority: number;
  readonly sequence: number;
  /** Wall-clock milliseconds: boot time plus the record's microseconds since boot. */
  readonly timestampMs: number;
  readonly message: string;
}

/** One OOM kill (oomparser.OomInstance). */
export interface OomInstance {
  readonly pid: number;
  readonly processName: string;
  readonly timeOfDeathMs: number;
  /** The cgroup of the killed task ("/" when the kernel did not say). */
  readonly containerName: string;
  /** The cgroup whose limit was hit; "/" for a system-wide OOM. */
  readonly victimContainerName: string;
  /** e.g. CONSTRAINT_MEMCG, CONSTRAINT_NONE; '' when the kernel did not say. */
  readonly constraint: string;
}

/**
 * The kernel log as the watcher reads it. `read` returns the records available now
 * (possibly none) without waiting; the watcher polls it.
 */
export interface KmsgSource {
  read(signal: AbortSignal): Promise<string[]>;
  close(): Promise<void>;
}

export type OomErrorCode =
  'BERTH_OOM_KMSG_OPEN' | 'BERTH_OOM_KMSG_READ' | 'BERTH_OOM_KMSG_MALFORMED';

export class OomError extends BerthError {
  declare readonly code: OomErrorCode;
  // Not useless: it narrows the accepted codes to OomErrorCode.
  // eslint-disable-next-line @typescript-eslint/no-useless-constructor
  constructor(code: OomErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}
