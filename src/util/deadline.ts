/**
 * A deadline on an operation that takes an AbortSignal, measured on the injected clock so
 * unit tests move it with a FakeClock.
 */
import type { Clock } from './clock.ts';

/**
 * Runs `fn` with a child of `parent` that also aborts after `ms` on `clock`, with the error
 * `onDeadline` makes. An `fn` that ignores its signal is still abandoned at the deadline
 * (its promise is raced), and the timer always ends before this returns.
 */
export async function withDeadline<T>(
  clock: Clock,
  parent: AbortSignal,
  ms: number,
  onDeadline: () => Error,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  parent.throwIfAborted();
  const ac = new AbortController();
  const onAbort = (): void => {
    ac.abort(parent.reason);
  };
  parent.addEventListener('abort', onAbort, { once: true });
  const timer = clock.sleep(ms, ac.signal).then(
    () => {
      ac.abort(onDeadline());
    },
    () => undefined,
  );
  try {
    return await Promise.race([
      fn(ac.signal),
      new Promise<never>((_, reject) => {
        ac.signal.addEventListener(
          'abort',
          () => {
            reject(ac.signal.reason as Error);
          },
          { once: true },
        );
      }),
    ]);
  } finally {
    parent.removeEventListener('abort', onAbort);
    if (!ac.signal.aborted) ac.abort(new Error('done'));
    await timer;
  }
}
