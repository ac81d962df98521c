/** Container log rotation (upstream pkg/kubelet/logs). */
export type { ContainerLogManager, ContainerLogManagerDeps, LogRotatePolicy } from './types.ts';
export {
  CriContainerLogManager,
  LogRotationError,
  compressLog,
  logRotatePolicy,
} from './manager.ts';
export { FakeContainerLogManager } from './fake.ts';
export {
  COMPRESS_SUFFIX,
  UnsafeLogPathError,
  allLogFiles,
  checkLogPath,
  rotationTimestamp,
  splitRotated,
} from './files.ts';
