/**
 * Where containerd 2.x and 1.6 answer differently, as observed against both in the test
 * cluster. The fake reads these traits instead of branching on the flavour name, so each
 * difference is stated once.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { CriMethod, FakeRuntimeFlavor } from './types.ts';

/** The observable differences of one containerd version. */
export interface FlavorTraits {
  readonly runtimeVersion: string;
  /** RPCs the runtime does not have; they answer Unimplemented. */
  readonly unimplemented: ReadonlySet<CriMethod>;
  /** StopContainer / StopPodSandbox of an unknown id: NotFound (1.6) or success (2.x). */
  readonly stopMissingIsNotFound: boolean;
  /** CreateContainer in a stopped sandbox. */
  readonly createInStoppedSandbox: GrpcStatus;
  /** RunPodSandbox / CreateContainer whose name is already taken. */
  readonly nameReserved: GrpcStatus;
  /** ContainerStatus carries imageId, user and stopSignal (2.x only). */
  readonly reportsImageId: boolean;
  /** The sandbox (pause) image is pinned, so image GC leaves it alone. */
  readonly pinsSandboxImage: boolean;
  /** Status lists runtime handlers and features. */
  readonly reportsHandlers: boolean;
}

const CONTAINERD2: FlavorTraits = {
  runtimeVersion: 'v2.4.2-berth-fake',
  unimplemented: new Set(),
  stopMissingIsNotFound: false,
  createInStoppedSandbox: GrpcStatus.UNKNOWN,
  nameReserved: GrpcStatus.FAILED_PRECONDITION,
  reportsImageId: true,
  pinsSandboxImage: true,
  reportsHandlers: true,
};

const CONTAINERD1: FlavorTraits = {
  runtimeVersion: '1.6.20-berth-fake',
  unimplemented: new Set<CriMethod>([
    'RuntimeService/GetContainerEvents',
    'RuntimeService/RuntimeConfig',
    'RuntimeService/ListMetricDescriptors',
    'RuntimeService/ListPodSandboxMetrics',
    'RuntimeService/CheckpointContainer',
  ]),
  stopMissingIsNotFound: true,
  createInStoppedSandbox: GrpcStatus.NOT_FOUND,
  nameReserved: GrpcStatus.UNKNOWN,
  reportsImageId: false,
  pinsSandboxImage: false,
  reportsHandlers: false,
};

/** The traits of a flavour. */
export function flavorTraits(flavor: FakeRuntimeFlavor): FlavorTraits {
  switch (flavor) {
    case 'containerd2':
      return CONTAINERD2;
    case 'containerd1':
      return CONTAINERD1;
  }
}
