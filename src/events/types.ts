/**
 * Kubernetes Events as the kubelet emits them (core/v1 Event, source component
 * "kubelet", host = node name). Reasons and messages follow upstream so that
 * `kubectl describe` reads the same: Pulling, Pulled, Failed, BackOff, Created,
 * Started, Killing, …
 */
export interface EventTarget {
  readonly kind: 'Pod' | 'Node';
  readonly namespace?: string;
  readonly name: string;
  readonly uid: string;
  readonly apiVersion?: string;
  /** e.g. "spec.containers{main}" for container events. */
  readonly fieldPath?: string;
}

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  /** Records an event; never throws and never blocks the caller (sent in the background). */
  event(target: EventTarget, type: EventType, reason: string, message: string): void;
}

/** Keeps events in memory (unit tests). */
export class MemoryEventRecorder implements EventRecorder {
  readonly events: { target: EventTarget; type: EventType; reason: string; message: string }[] = [];
  event(target: EventTarget, type: EventType, reason: string, message: string): void {
    this.events.push({ target, type, reason, message });
  }
  reasons(): string[] {
    return this.events.map((e) => e.reason);
  }
}
