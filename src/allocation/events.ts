/**
 * The resize events' messages as upstream writes them (pkg/kubelet/events/resize.go):
 * a prefix, then the desired resources of every container and the generation as JSON,
 * e.g. `Pod resize started: {"containers":[{"name":"c","resources":{...}}],"generation":2}`.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { goString, requirementsJson } from './checkpoint.ts';

export const RESIZE_STARTED = 'ResizeStarted';
export const RESIZE_DEFERRED = 'ResizeDeferred';
export const RESIZE_INFEASIBLE = 'ResizeInfeasible';
export const RESIZE_COMPLETED = 'ResizeCompleted';
export const RESIZE_ERROR = 'ResizeError';

function containers(list: readonly Container[]): string {
  return `[${list.map((c) => `{"name":${goString(c.name)},"resources":${requirementsJson(c.resources ?? {})}}`).join(',')}]`;
}

function summary(pod: Pod, generation: number, error: string): string {
  const parts: string[] = [];
  const inits = pod.spec?.initContainers ?? [];
  const apps = pod.spec?.containers ?? [];
  if (inits.length > 0) parts.push(`"initContainers":${containers(inits)}`);
  if (apps.length > 0) parts.push(`"containers":${containers(apps)}`);
  parts.push(`"generation":${generation}`);
  if (error !== '') parts.push(`"error":${goString(error)}`);
  return `{${parts.join(',')}}`;
}

export function resizeStartedMessage(pod: Pod, generation: number): string {
  return `Pod resize started: ${summary(pod, generation, '')}`;
}

export function resizeCompletedMessage(pod: Pod, generation: number): string {
  return `Pod resize completed: ${summary(pod, generation, '')}`;
}

export function resizeErrorMessage(pod: Pod, generation: number, error: string): string {
  return `Pod resize error: ${summary(pod, generation, error)}`;
}

export function resizePendingMessage(
  pod: Pod,
  reason: string,
  message: string,
  generation: number,
): string {
  return `Pod resize ${reason}: ${summary(pod, generation, message)}`;
}
