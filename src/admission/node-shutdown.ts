/**
 * The node shutdown manager's admit handler (upstream's nodeshutdown managerImpl.Admit):
 * while the node is shutting down every new pod is refused, since it would be stopped
 * again within seconds and could only delay the shutdown.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { PodAdmitResult } from './predicates.ts';

export const NODE_SHUTDOWN_NOT_ADMITTED_REASON = 'NodeShutdown';
export const NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE = 'Pod was rejected as the node is shutting down.';

export function nodeShutdownAdmitHandler(shuttingDown: () => boolean): {
  admit(pod: Pod): PodAdmitResult;
} {
  return {
    admit(): PodAdmitResult {
      return shuttingDown()
        ? {
            admit: false,
            reason: NODE_SHUTDOWN_NOT_ADMITTED_REASON,
            message: NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE,
          }
        : { admit: true };
    },
  };
}
