/**
 * metav1.Status, the body of every API error and of watch ERROR events, and its
 * mapping to `KubeApiError`. The fake client builds its errors here too, so a test
 * against the fake sees the same status, reason and message shapes as the apiserver.
 */
import type { Status } from 'kubernetes-types/meta/v1.js';
import { KubeApiError, type KubeErrorReason } from './types.ts';

/** metav1.Status, re-exported for callers that build or inspect one. */
export type { Status } from 'kubernetes-types/meta/v1.js';

const KNOWN_REASONS: ReadonlySet<string> = new Set<KubeErrorReason>([
  'NotFound',
  'AlreadyExists',
  'Conflict',
  'Gone',
  'Expired',
  'Invalid',
  'Forbidden',
  'Unauthorized',
  'TooManyRequests',
  'BadRequest',
  'InternalError',
  'Timeout',
  'Unknown',
]);

/** The reason the apiserver gives for an HTTP status when the body names none. */
export function reasonForHttpStatus(status: number): KubeErrorReason {
  switch (status) {
    case 400:
      return 'BadRequest';
    case 401:
      return 'Unauthorized';
    case 403:
      return 'Forbidden';
    case 404:
      return 'NotFound';
    case 409:
      return 'Conflict';
    case 410:
      return 'Gone';
    case 422:
      return 'Invalid';
    case 429:
      return 'TooManyRequests';
    case 500:
      return 'InternalError';
    case 504:
      return 'Timeout';
    default:
      return 'Unknown';
  }
}

function normaliseReason(reason: string | undefined, status: number): KubeErrorReason {
  if (reason !== undefined && KNOWN_REASONS.has(reason)) return reason as KubeErrorReason;
  // "ServerTimeout" is the apiserver's name for a timeout it hit itself.
  if (reason === 'ServerTimeout') return 'Timeout';
  return reasonForHttpStatus(status);
}

/** True when `value` looks like a metav1.Status object. */
export function isStatus(value: unknown): value is Status {
  return (
    typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'Status'
  );
}

/**
 * The error for an API answer: `httpStatus` is the response's status code (the
 * Status's own `code` wins when the body has one, as for watch ERROR events).
 * `context` (e.g. "GET /api/v1/…") prefixes the message.
 */
export function errorFromStatus(
  status: Status | undefined,
  httpStatus: number,
  context?: string,
): KubeApiError {
  const code = status?.code !== undefined && status.code > 0 ? status.code : httpStatus;
  const reason = normaliseReason(status?.reason, code);
  const detail =
    status?.message !== undefined && status.message !== ''
      ? status.message
      : `the server answered ${code}${status?.reason === undefined ? '' : ` ${status.reason}`}`;
  const message = context === undefined ? detail : `${context}: ${detail}`;
  return new KubeApiError(code, reason, message);
}

/**
 * The error a watch ERROR event carries. The apiserver sends a Status (410 Expired when
 * the requested resourceVersion was compacted); anything else is an unknown error.
 */
export function statusFromWatchError(object: unknown, context?: string): KubeApiError {
  if (isStatus(object)) return errorFromStatus(object, 500, context);
  return new KubeApiError(
    500,
    'Unknown',
    `${context === undefined ? '' : `${context}: `}watch ERROR event without a Status object`,
  );
}

/** Builds a failure Status as the apiserver would (the fake client's errors). */
export function failureStatus(
  code: number,
  reason: string,
  message: string,
  details?: { name?: string; group?: string; kind?: string },
): Status {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details === undefined ? {} : { details }),
    code,
  };
}

/** How many times one request is sent again when the server says when (client-go's maxRetries). */
export const MAX_RETRY_AFTER_RETRIES = 10;

/**
 * The wait the server asked for before this request is sent again, as client-go's
 * checkWait reads it: only on 429 and 5xx, and only with a Retry-After header in whole
 * seconds (the apiserver's overload and shutdown answers carry one). Undefined: do not
 * retry, the answer is the error.
 */
export function retryAfterMs(
  statusCode: number,
  retryAfter: string | string[] | undefined,
): number | undefined {
  if (statusCode !== 429 && statusCode < 500) return undefined;
  if (typeof retryAfter !== 'string' || !/^\d+$/.test(retryAfter.trim())) return undefined;
  return Number(retryAfter.trim()) * 1000;
}
