/**
 * Checks of a container's effective security context that the runtime cannot do for
 * the kubelet: runAsNonRoot against the user the image runs as (upstream's
 * verifyRunAsNonRoot). A failure is a CreateContainerConfigError; the messages are
 * upstream's.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { BerthError } from '../util/errors.ts';
import { podDescription } from '../container/format.ts';

export class SecurityContextError extends BerthError {
  constructor(message: string) {
    super('BERTH_SECURITY_CONTEXT', message);
  }
}

const MAX_UID = 2 ** 31 - 1;

/** The user an image runs as (CRI ImageStatus: uid when numeric, else username). */
export interface ImageUser {
  readonly uid?: number;
  readonly username?: string;
}

/** The container's runAsNonRoot and runAsUser, the container's settings over the pod's. */
export function effectiveRunAs(
  pod: Pod,
  container: Container,
): { runAsNonRoot: boolean; runAsUser?: number } {
  const podSc = pod.spec?.securityContext;
  const sc = container.securityContext;
  const runAsUser = sc?.runAsUser ?? podSc?.runAsUser;
  return {
    runAsNonRoot: (sc?.runAsNonRoot ?? podSc?.runAsNonRoot) === true,
    ...(runAsUser !== undefined && { runAsUser }),
  };
}

/** Throws SecurityContextError when runAsNonRoot cannot be honoured. */
export function verifyRunAsNonRoot(pod: Pod, container: Container, image: ImageUser): void {
  const { runAsNonRoot, runAsUser } = effectiveRunAs(pod, container);
  if (!runAsNonRoot) return;
  const who = `(pod: "${podDescription(pod)}", container: ${container.name})`;
  if (runAsUser !== undefined) {
    if (runAsUser === 0)
      throw new SecurityContextError(`container's runAsUser breaks non-root policy ${who}`);
    return;
  }
  if (image.uid === undefined) {
    if (image.username !== undefined && image.username !== '')
      throw new SecurityContextError(
        `container has runAsNonRoot and image has non-numeric user (${image.username}), cannot verify user is non-root ${who}`,
      );
    return;
  }
  if (image.uid === 0)
    throw new SecurityContextError(`container has runAsNonRoot and image will run as root ${who}`);
  if (!Number.isInteger(image.uid) || image.uid < 1 || image.uid > MAX_UID)
    throw new SecurityContextError(
      `container has runAsNonRoot and image has an invalid user id (${image.uid}). (Must be 1-(${MAX_UID})): must be between 1 and ${MAX_UID}, inclusive ${who}`,
    );
}
