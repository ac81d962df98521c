/**
 * The event recorder of a standalone kubelet: with no API server events cannot be
 * posted, so they are only logged (upstream logs every event at V(3) and, with no
 * event client, sends none).
 */
import type { Logger } from '../util/logger.ts';
import type { EventRecorder, EventTarget, EventType } from './types.ts';

export class LogEventRecorder implements EventRecorder {
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  event(target: EventTarget, type: EventType, reason: string, message: string): void {
    this.#logger.debug('Event occurred', {
      object: `${target.namespace ?? ''}/${target.name}`,
      kind: target.kind,
      type,
      reason,
      message,
    });
  }

  /** Nothing is queued: for symmetry with the API recorder. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
