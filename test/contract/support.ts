/** Small helpers the CRI contract's test files share. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CriError, CriNotFoundError, cri } from '../../src/cri/index.ts';

/**
 * Polls `fn` until it returns a value. Real runtimes report some changes a moment later
 * (a container's exit, a log line); the fake answers on the first try.
 */
export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** An id no runtime knows: 64 hex digits, like a real one. */
export function unknownId(): string {
  return randomBytes(32).toString('hex');
}

/**
 * Runtimes disagree on stopping what does not exist (containerd 2.x succeeds, 1.6 says
 * NotFound); the CRI allows both, so berth must accept both.
 */
export async function resolvesOrNotFound(call: Promise<unknown>): Promise<void> {
  await call.catch((err: unknown) => {
    assert.ok(err instanceof CriNotFoundError, String(err));
  });
}

/** Asserts a rejection with a plain CriError (code BERTH_CRI_FAILED), as for wrong states. */
export async function rejectsAsFailed(call: Promise<unknown>): Promise<void> {
  await assert.rejects(call, (err: unknown) => {
    assert.ok(err instanceof CriError, String(err));
    assert.equal(err.code, 'BERTH_CRI_FAILED', String(err));
    return true;
  });
}

/** True when `ip` is an IPv4 address inside `subnet` (a.b.c.d/N). */
export function inSubnet(ip: string, subnet: string): boolean {
  const [network, bits] = subnet.split('/');
  if (network === undefined || bits === undefined) return false;
  const toInt = (a: string): number => a.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  const size = 2 ** (32 - Number(bits));
  const base = toInt(network) - (toInt(network) % size);
  return /^\d+\.\d+\.\d+\.\d+$/.test(ip) && toInt(ip) >= base && toInt(ip) < base + size;
}

/** A container config for one of the contract's programs. */
export function containerConfig(
  name: string,
  image: string,
  command: readonly string[],
  extra: cri.DeepPartial<cri.ContainerConfig> = {},
): cri.DeepPartial<cri.ContainerConfig> {
  return {
    metadata: { name, attempt: 0 },
    image: { image },
    command: [...command],
    logPath: `${name}/0.log`,
    labels: { 'io.kubernetes.container.name': name },
    ...extra,
  };
}
