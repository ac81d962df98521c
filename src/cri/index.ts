/** The CRI client: typed RuntimeService and ImageService over the runtime's socket. */
export * from './errors.ts';
export * from './types.ts';
export { GrpcCriClient, type GrpcCriClientOptions } from './grpc-client.ts';
export type { CriMetrics } from './metrics.ts';
export * as cri from './gen/runtime/v1/api.ts';
