/**
 * What a rejection does, for AdmissionManager and its fake alike: upstream's rejectPod
 * (a Warning event with the reason, phase Failed with "Pod was rejected: <message>").
 */
import type { Pod, PodStatus } from 'kubernetes-types/core/v1.js';
import { qosClassOf } from '../container/qos.ts';
import type { EventRecorder } from '../events/types.ts';
import type { Logger } from '../util/logger.ts';

export interface RejectionDeps {
  readonly setStatus: (pod: Pod, status: PodStatus) => void;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
}

export function isTerminalPhase(phase: string | undefined): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

/** Records the rejection of `pod`: a log line, the event and the Failed status. */
export function rejectPod(d: RejectionDeps, pod: Pod, reason: string, message: string): void {
  const m = pod.metadata ?? {};
  const uid = m.uid ?? '';
  d.logger.info('Pod admission rejected', {
    pod: `${m.namespace ?? ''}/${m.name ?? ''}`,
    uid,
    reason,
    message,
  });
  d.recorder.event(
    { kind: 'Pod', apiVersion: 'v1', namespace: m.namespace ?? '', name: m.name ?? '', uid },
    'Warning',
    reason,
    message,
  );
  d.setStatus(pod, {
    ...pod.status,
    phase: 'Failed',
    reason,
    message: `Pod was rejected: ${message}`,
    qosClass: pod.status?.qosClass ?? qosClassOf(pod),
  });
}
