/**
 * The pure core of the runtime sync: given a pod's spec and what the runtime reports
 * for it, decide what the sync must do this round (upstream's computePodActions). No
 * I/O and no clock reads: the caller passes `now`, the back-off state and the probe
 * results, and performs the actions in the documented order:
 *
 *   kill the pod (sandbox + all containers) if `killPod`
 *   -> kill `containersToKill` -> create a sandbox if `createSandbox`
 *   -> start `ephemeralContainersToStart` -> start `initContainersToStart` in order
 *      (a sidecar that fails to start does not stop the next; a regular init container
 *      that fails to start ends the round) -> start `containersToStart`.
 *
 * Decisions, in the order they are taken:
 *
 * 1. Sandbox. A new sandbox is needed when there is none, the newest is not ready,
 *    more than one is ready, its network namespace mode no longer matches
 *    `hostNetwork`, or a pod-network sandbox has no IP. A new sandbox means killing the
 *    whole pod first and starting over from the first init container, except that a
 *    `restartPolicy: Never` pod whose containers have run gets no new sandbox, and a pod
 *    whose app containers have all run and none may run again gets none either.
 * 2. Ephemeral containers with no instance yet are started; they never restart.
 * 3. Init containers, one at a time in spec order, judged on the current sandbox only.
 *    A regular init container that failed and may not restart fails the pod
 *    (`initFailed`, `killPod`). Sidecars (restartPolicy Always) are started in order,
 *    the next init container starting once the sidecar has started (after its startup
 *    probe, if any, passed), and restarted whenever not running, on a spec change, a
 *    liveness/startup failure, or a resize that needs a restart.
 * 4. App containers, only once initialisation is done: a missing, created or unknown
 *    container is (re)started; an exited one per its effective restart policy; a
 *    running one is killed when its spec hash changed (then always restarted), a
 *    liveness/startup probe failed (restarted unless the policy is Never), or its
 *    resize needs a restart (`resizeRestarts`, always restarted). When nothing
 *    is left running and nothing is to start, the pod is killed (this also stops the
 *    sidecars).
 * 5. Back-off. A container to start whose newest exited instance ran the current spec
 *    and whose back-off key is still backing off is taken out of the start lists and
 *    reported in `waiting` with reason CrashLoopBackOff and its retry time. The caller
 *    records the failure (Backoff.next) when it does restart an exited container.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { hashContainer, sameContainerHash } from '../container/container-hash.ts';
import {
  exitCodeOf,
  isFailedInstance,
  isPodDeleting,
  isSidecar,
  podRestartPolicy,
  restartsAfterKill,
  shouldRestartAfterExit,
  shouldRestartAfterFailure,
} from '../container/restart-policy.ts';
import {
  latestContainer,
  type RuntimeContainer,
  type RuntimePodStatus,
} from '../container/pod-status.ts';
import { holdBackCrashLooping, type WaitingContainer } from './crash-backoff.ts';
import { containersToReset } from './restart-all.ts';
import { decideSandbox, type SandboxChangeReason } from './sandbox-decision.ts';
import type { ProbeResult, ProbeResultsReader } from '../prober/types.ts';

export type { SandboxChangeReason } from './sandbox-decision.ts';
export type { ContainerToKill, KillReason, PlanInput, PodActions } from './plan-types.ts';
import type { ContainerToKill, KillReason, PlanInput, PodActions } from './plan-types.ts';
export {
  containerBackoffKey,
  type BackoffReader,
  type WaitingContainer,
  type WaitingReason,
} from './crash-backoff.ts';

/** Mutable form of PodActions while the plan is being built. */
interface Draft {
  killPod: boolean;
  createSandbox: boolean;
  sandboxId: string | undefined;
  sandboxChangeReason: SandboxChangeReason | undefined;
  attempt: number;
  initFailed: boolean;
  initToStart: string[];
  toStart: string[];
  ephemeralToStart: string[];
  toKill: ContainerToKill[];
}

interface Context {
  readonly pod: Pod;
  readonly status: RuntimePodStatus;
  readonly probes: ProbeResultsReader | undefined;
  readonly resizeRestarts: ReadonlyMap<string, string>;
  readonly draft: Draft;
}

/** Decides this round's actions for `input.pod`; pure. */
export function computePodActions(input: PlanInput): PodActions {
  const { pod, status } = input;
  const sandbox = decideSandbox(pod, status);
  const draft: Draft = {
    // Replacing the sandbox means stopping whatever is left of the pod; a pod the
    // runtime has never seen has nothing to stop.
    killPod: sandbox.create && (status.sandboxes.length > 0 || status.containers.length > 0),
    createSandbox: sandbox.create,
    sandboxId: sandbox.sandboxId,
    sandboxChangeReason: sandbox.reason,
    attempt: sandbox.attempt,
    initFailed: false,
    initToStart: [],
    toStart: [],
    ephemeralToStart: [],
    toKill: [],
  };
  const context: Context = {
    pod,
    status,
    probes: input.probes,
    resizeRestarts: input.resizeRestarts ?? new Map(),
    draft,
  };
  if (input.restartAll === true && !sandbox.create) {
    return { ...finish(input, draft), containersToReset: containersToReset(pod, status) };
  }
  if (sandbox.create) {
    planFreshSandbox(context);
  } else {
    planEphemeralContainers(context);
    const initialized = planInitContainers(context, sandbox.sandboxId ?? '');
    if (!draft.killPod && initialized) planAppContainers(context);
  }
  return finish(input, draft);
}

/** Step 1 when the sandbox is (re)created: start over, or give up on a finished pod. */
function planFreshSandbox({ pod, status, draft }: Context): void {
  if (podRestartPolicy(pod) === 'Never' && draft.attempt !== 0 && status.containers.length > 0) {
    // The pod ran in a sandbox that is gone; Never means it does not run again.
    draft.createSandbox = false;
    return;
  }
  const toStart = appContainers(pod)
    .filter((container) => {
      const latest = latestContainer(status, container.name);
      return !(
        latest?.state === 'exited' && !shouldRestartAfterExit(container, pod, exitCodeOf(latest))
      );
    })
    .map((container) => container.name);
  if (toStart.length === 0 && anyAppContainerCreated(pod, status)) {
    // Initialisation finished before and no app container may run again: a new
    // sandbox would only be torn down again.
    draft.createSandbox = false;
    return;
  }
  const firstInit = pod.spec?.initContainers?.[0];
  if (firstInit !== undefined) {
    draft.initToStart = [firstInit.name];
    return;
  }
  draft.toStart = toStart;
}

/** Step 2: ephemeral containers run once, never restart. */
function planEphemeralContainers({ pod, status, draft }: Context): void {
  for (const container of pod.spec?.ephemeralContainers ?? []) {
    if (latestContainer(status, container.name) === undefined) {
      draft.ephemeralToStart.push(container.name);
    }
  }
}

/**
 * Step 3. Walks the init containers from the last one back: completed init containers
 * may have been garbage-collected, so the furthest one with an instance in the current
 * sandbox tells how far initialisation got. Returns whether the pod is initialised.
 */
function planInitContainers(context: Context, sandboxId: string): boolean {
  const { pod, status, draft } = context;
  const inits = pod.spec?.initContainers ?? [];
  if (inits.length === 0) return true;
  const inSandbox = (name: string): RuntimeContainer | undefined =>
    latestContainer(status, name, sandboxId);
  // An app container in this sandbox means initialisation completed here.
  let initialized = appContainers(pod).some((c) => inSandbox(c.name) !== undefined);
  let laterSeen = initialized;
  const starts = new Set<number>();
  const last = inits.length - 1;
  for (let i = last; i >= 0; i--) {
    const container = inits[i];
    if (container === undefined) continue;
    const instance = inSandbox(container.name);
    const sidecar = isSidecar(container);
    if (instance === undefined) {
      // A sidecar whose instance vanished after initialisation got past it must run.
      if (laterSeen && sidecar) starts.add(i);
      continue;
    }
    // Past a completed regular init container only the sidecars need attention.
    if (!(laterSeen && !sidecar)) {
      switch (instance.state) {
        case 'created':
          // Create and start happen in one step; a container left created failed to
          // start, so try again rather than waiting forever.
          starts.add(i);
          break;
        case 'running':
          if (sidecar && sidecarStarted(context, container, instance)) {
            if (i === last) initialized = true;
            else if (!laterSeen) starts.add(i + 1);
            checkRunningSidecar(context, container, instance, () => starts.add(i));
          } else if (!sidecar && context.resizeRestarts.has(container.name)) {
            kill(draft, instance, 'resize', context.resizeRestarts.get(container.name) ?? '');
            starts.add(i);
          } else if (sidecar && probeOf(context, 'startup', container, instance) === 'failure') {
            kill(
              draft,
              instance,
              'startup',
              `Init container ${container.name} failed startup probe, will be restarted`,
            );
            starts.add(i);
          }
          break;
        case 'exited':
          if (sidecar) {
            starts.add(i);
          } else if (isFailedInstance(instance)) {
            if (!restartInit(pod, container, instance)) return failInit(draft);
            starts.add(i);
          } else if (i === last) {
            initialized = true;
          } else {
            starts.add(i + 1);
          }
          break;
        case 'unknown':
          if (!sidecar && !restartInit(pod, container, instance)) return failInit(draft);
          kill(
            draft,
            instance,
            'unknown state',
            `Init container ${container.name} is in "unknown" state, killing it before restart`,
          );
          starts.add(i);
          break;
      }
    }
    laterSeen = true;
  }
  // No init container has run in this sandbox yet: begin with the first.
  if (!laterSeen) starts.add(0);
  draft.initToStart = [...starts].sort((a, b) => a - b).flatMap((i) => inits[i]?.name ?? []);
  return initialized;
}

/** A running sidecar counts as started once its startup probe (if any) passed. */
function sidecarStarted(
  context: Context,
  container: Container,
  instance: RuntimeContainer,
): boolean {
  return (
    container.startupProbe === undefined ||
    probeOf(context, 'startup', container, instance) === 'success'
  );
}

/** A started sidecar is restarted on a spec change or a failed liveness probe. */
function checkRunningSidecar(
  context: Context,
  container: Container,
  instance: RuntimeContainer,
  restart: () => void,
): void {
  if (!sameContainerHash(instance.hash, hashContainer(container))) {
    kill(
      context.draft,
      instance,
      'spec changed',
      `Init container ${container.name} definition changed, will be restarted`,
    );
    restart();
  } else if (
    container.livenessProbe !== undefined &&
    probeOf(context, 'liveness', container, instance) === 'failure'
  ) {
    kill(
      context.draft,
      instance,
      'liveness',
      `Init container ${container.name} failed liveness probe, will be restarted`,
    );
    restart();
  } else {
    const resize = context.resizeRestarts.get(container.name);
    if (resize !== undefined) {
      kill(context.draft, instance, 'resize', resize);
      restart();
    }
  }
}

function restartInit(pod: Pod, container: Container, instance: RuntimeContainer): boolean {
  if (instance.state === 'unknown') return shouldRestartAfterFailure(container, pod, undefined);
  return !isPodDeleting(pod) && shouldRestartAfterFailure(container, pod, exitCodeOf(instance));
}

function failInit(draft: Draft): false {
  draft.killPod = true;
  draft.initFailed = true;
  draft.initToStart = [];
  return false;
}

/** Step 4: app containers, once the pod is initialised. */
function planAppContainers(context: Context): void {
  const { pod, status, draft } = context;
  let keep = 0;
  for (const container of appContainers(pod)) {
    const latest = latestContainer(status, container.name);
    if (latest?.state !== 'running') {
      if (shouldStartAppContainer(pod, container, latest)) {
        draft.toStart.push(container.name);
        if (latest?.state === 'unknown') {
          // It may still be running: never risk two instances of one container.
          kill(
            draft,
            latest,
            'unknown state',
            `Container ${container.name} is in "unknown" state, killing it before restart`,
          );
        }
      }
      continue;
    }
    let reason: KillReason;
    let what: string;
    let restart = restartsAfterKill(container, pod);
    if (!sameContainerHash(latest.hash, hashContainer(container))) {
      reason = 'spec changed';
      what = 'definition changed';
      // A new spec is applied whatever the restart policy says.
      restart = true;
    } else if (probeOf(context, 'liveness', container, latest) === 'failure') {
      reason = 'liveness';
      what = 'failed liveness probe';
    } else if (probeOf(context, 'startup', container, latest) === 'failure') {
      reason = 'startup';
      what = 'failed startup probe';
    } else if (context.resizeRestarts.has(container.name)) {
      // Upstream's computePodResizeAction: restarted with its new allocation.
      draft.toStart.push(container.name);
      kill(draft, latest, 'resize', context.resizeRestarts.get(container.name) ?? '');
      continue;
    } else {
      keep++;
      continue;
    }
    if (restart) draft.toStart.push(container.name);
    kill(
      draft,
      latest,
      reason,
      `Container ${container.name} ${what}${restart ? ', will be restarted' : ''}`,
    );
  }
  if (keep === 0 && draft.toStart.length === 0) {
    // Every app container is done for good: stop the pod, sidecars included, rather
    // than keep restarting sidecars for nobody.
    draft.killPod = true;
    draft.initToStart = [];
  }
}

function shouldStartAppContainer(
  pod: Pod,
  container: Container,
  latest: RuntimeContainer | undefined,
): boolean {
  if (isPodDeleting(pod)) return false;
  if (latest === undefined) return true;
  switch (latest.state) {
    case 'created':
    case 'unknown':
      return true;
    case 'exited':
      return shouldRestartAfterExit(container, pod, exitCodeOf(latest));
    case 'running':
      return false;
  }
}

/** Step 5: hold back containers in back-off, then freeze the result. */
function finish(input: PlanInput, draft: Draft): PodActions {
  const { pod } = input;
  const waiting: Record<string, WaitingContainer> = {};
  const gate = (names: readonly string[]): string[] => holdBackCrashLooping(names, input, waiting);
  const initContainersToStart = gate(draft.initToStart);
  const inits = pod.spec?.initContainers ?? [];
  const nextInit = initContainersToStart.find((name) =>
    inits.some((c) => c.name === name && !isSidecar(c)),
  );
  return {
    killPod: draft.killPod,
    createSandbox: draft.createSandbox,
    ...(draft.sandboxId === undefined ? {} : { sandboxId: draft.sandboxId }),
    ...(draft.sandboxChangeReason === undefined
      ? {}
      : { sandboxChangeReason: draft.sandboxChangeReason }),
    attempt: draft.attempt,
    initContainersToStart,
    ...(nextInit === undefined ? {} : { nextInitContainerToStart: nextInit }),
    ...(draft.initFailed ? { initFailed: true } : {}),
    containersToStart: gate(draft.toStart),
    // Nothing is started in a sandbox that is being torn down.
    ephemeralContainersToStart: draft.killPod ? [] : draft.ephemeralToStart,
    containersToKill: draft.toKill,
    waiting,
    containersToReset: [],
  };
}

function kill(draft: Draft, instance: RuntimeContainer, reason: KillReason, message: string): void {
  if (draft.toKill.some((k) => k.id === instance.id)) return;
  draft.toKill.push({ id: instance.id, name: instance.name, reason, message });
}

function probeOf(
  { probes }: Context,
  kind: 'liveness' | 'startup',
  container: Container,
  instance: RuntimeContainer,
): ProbeResult | undefined {
  const configured = kind === 'liveness' ? container.livenessProbe : container.startupProbe;
  if (configured === undefined) return undefined;
  return probes === undefined ? 'success' : probes.get(kind, instance.id);
}

function appContainers(pod: Pod): readonly Container[] {
  return pod.spec?.containers ?? [];
}

function anyAppContainerCreated(pod: Pod, status: RuntimePodStatus): boolean {
  return appContainers(pod).some((c) => {
    const state = latestContainer(status, c.name)?.state;
    return state === 'created' || state === 'running' || state === 'exited';
  });
}

// The sync loop asks the plan module whether a pod is over; the logic lives beside the
// restart decisions it shares.
export { isPodTerminal, type TerminalPhase } from './pod-terminal.ts';
