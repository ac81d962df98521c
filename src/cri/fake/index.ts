/** The in-memory CRI runtime for unit tests (see fake-runtime.ts). */
export { FakeCriClient, type FakeCriClientOptions } from './fake-runtime.ts';
export type { FakeHold } from './transport.ts';
export { criLogRecords, rfc3339Nano } from './logs.ts';
export type {
  CriMethod,
  FakeCall,
  FakeContainerInfo,
  FakeExecHandler,
  FakeExecOutcome,
  FakeFailure,
  FakeImageOptions,
  FakeImageRef,
  FakeLogLine,
  FakeRuntimeFlavor,
  FakeStartHandler,
  FakeStartOutcome,
  FakeUsage,
} from './types.ts';
