/**
 * The Kubernetes API as berth uses it: the `KubeClient` interface and helpers
 * (types.ts), the node:http(s) implementation, kubeconfig loading, the reflector, and the
 * in-memory fake. The contract suite (contract.ts) imports node:test, so it is not
 * re-exported here.
 */
export * from './types.ts';
export { HttpKubeClient, type HttpKubeClientOptions } from './http-client.ts';
export { defaultUserAgent } from './user-agent.ts';
export {
  KubeconfigError,
  loadKubeconfig,
  parseKubeconfig,
  readCredentials,
  type KubeCredentials,
  type KubeconfigEntry,
} from './kubeconfig.ts';
export {
  Reflector,
  type ReflectorHandler,
  type ReflectorHealth,
  type ReflectorOptions,
} from './reflector.ts';
export { FakeKubeClient, type FakeCall, type FakeFailure } from './fake-client.ts';
export { TokenBucket } from './rate-limiter.ts';
export { errorFromStatus, statusFromWatchError } from './status.ts';
