/**
 * Builders for unit tests that need a pod and its runtime state (kuberuntime's plan,
 * the prober, lifecycle, status): terse pods, sandboxes and container instances. Not
 * used by production code.
 */
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { hashContainer } from './container-hash.ts';
import type {
  RuntimeContainer,
  RuntimeContainerState,
  RuntimePodStatus,
  SandboxStatus,
} from './pod-status.ts';

/** The UID every test pod gets unless told otherwise. */
export const TEST_POD_UID = 'uid-1';

/** A container spec with a per-name image. */
export function spec(name: string, extra: Partial<Container> = {}): Container {
  return { name, image: `registry.test/${name}:1`, ...extra };
}

/** Options of {@link testPod}. */
export interface TestPodOptions {
  readonly restartPolicy?: 'Always' | 'OnFailure' | 'Never';
  readonly containers?: readonly (string | Container)[];
  readonly initContainers?: readonly (string | Container)[];
  readonly ephemeralContainers?: readonly string[];
  readonly hostNetwork?: boolean;
  readonly deleting?: boolean;
}

/** A pod `web` in `default` with UID {@link TEST_POD_UID} (one container `main` by default). */
export function testPod(options: TestPodOptions = {}): Pod {
  const toSpec = (c: string | Container): Container => (typeof c === 'string' ? spec(c) : c);
  return {
    metadata: {
      name: 'web',
      namespace: 'default',
      uid: TEST_POD_UID,
      ...(options.deleting === true ? { deletionTimestamp: '2030-01-01T00:00:00Z' } : {}),
    },
    spec: {
      ...(options.restartPolicy === undefined ? {} : { restartPolicy: options.restartPolicy }),
      ...(options.hostNetwork === undefined ? {} : { hostNetwork: options.hostNetwork }),
      containers: (options.containers ?? ['main']).map(toSpec),
      ...(options.initContainers === undefined
        ? {}
        : { initContainers: options.initContainers.map(toSpec) }),
      ...(options.ephemeralContainers === undefined
        ? {}
        : {
            ephemeralContainers: options.ephemeralContainers.map((name) => ({
              name,
              image: 'registry.test/debug:1',
            })),
          }),
    },
  };
}

/** A ready pod-network sandbox `sb1` with an IP, unless overridden. */
export function sandbox(overrides: Partial<SandboxStatus> = {}): SandboxStatus {
  return {
    id: 'sb1',
    state: 'ready',
    attempt: 0,
    createdAt: 1_000,
    ip: '10.1.0.5',
    ips: ['10.1.0.5'],
    network: 'pod',
    ...overrides,
  };
}

/** Options of {@link instance}. */
export interface InstanceOptions {
  readonly exitCode?: number;
  readonly reason?: string;
  readonly attempt?: number;
  readonly createdAt?: number;
  readonly sandboxId?: string;
  /** The spec the instance was created from; its hash is recorded. */
  readonly from?: Container;
  /** Overrides the recorded hash. */
  readonly hash?: string;
  readonly id?: string;
}

/** A container instance of spec container `name` in sandbox `sb1`. */
export function instance(
  name: string,
  state: RuntimeContainerState,
  options: InstanceOptions = {},
): RuntimeContainer {
  const attempt = options.attempt ?? 0;
  const from = options.from ?? spec(name);
  return {
    id: options.id ?? `${name}-${attempt}`,
    name,
    state,
    attempt,
    ...(options.exitCode === undefined ? {} : { exitCode: options.exitCode }),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
    createdAt: options.createdAt ?? 2_000 + attempt * 1_000,
    ...(state === 'created' ? {} : { startedAt: (options.createdAt ?? 2_000) + 10 }),
    ...(state === 'exited' ? { finishedAt: (options.createdAt ?? 2_000) + 500 } : {}),
    hash: options.hash ?? hashContainer(from),
    image: from.image ?? '',
    imageRef: `sha256:${name}`,
    sandboxId: options.sandboxId ?? 'sb1',
  };
}

/** The runtime state of the test pod. */
export function runtimeStatus(
  sandboxes: readonly SandboxStatus[],
  containers: readonly RuntimeContainer[],
): RuntimePodStatus {
  return { uid: TEST_POD_UID, name: 'web', namespace: 'default', sandboxes, containers };
}
