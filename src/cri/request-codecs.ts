/**
 * The request codec of every RPC berth uses: the generated service definitions carry
 * serializers, but filling proto3 defaults into a partial request (fromPartial) needs
 * the message codec itself. The mapped types make a missing or mismatched entry a
 * compile error.
 */
import * as api from './gen/runtime/v1/api.ts';
import type { ImageServiceDefinition, RequestOf, RuntimeServiceDefinition } from './types.ts';

type Codecs<S> = { readonly [K in keyof S]: api.MessageFns<RequestOf<S[K]>> };

export const RUNTIME_REQUESTS: Codecs<RuntimeServiceDefinition> = {
  version: api.VersionRequest,
  runPodSandbox: api.RunPodSandboxRequest,
  stopPodSandbox: api.StopPodSandboxRequest,
  removePodSandbox: api.RemovePodSandboxRequest,
  podSandboxStatus: api.PodSandboxStatusRequest,
  listPodSandbox: api.ListPodSandboxRequest,
  createContainer: api.CreateContainerRequest,
  startContainer: api.StartContainerRequest,
  stopContainer: api.StopContainerRequest,
  removeContainer: api.RemoveContainerRequest,
  listContainers: api.ListContainersRequest,
  containerStatus: api.ContainerStatusRequest,
  updateContainerResources: api.UpdateContainerResourcesRequest,
  reopenContainerLog: api.ReopenContainerLogRequest,
  execSync: api.ExecSyncRequest,
  exec: api.ExecRequest,
  attach: api.AttachRequest,
  portForward: api.PortForwardRequest,
  containerStats: api.ContainerStatsRequest,
  listContainerStats: api.ListContainerStatsRequest,
  podSandboxStats: api.PodSandboxStatsRequest,
  listPodSandboxStats: api.ListPodSandboxStatsRequest,
  updateRuntimeConfig: api.UpdateRuntimeConfigRequest,
  status: api.StatusRequest,
  checkpointContainer: api.CheckpointContainerRequest,
  getContainerEvents: api.GetEventsRequest,
  listMetricDescriptors: api.ListMetricDescriptorsRequest,
  listPodSandboxMetrics: api.ListPodSandboxMetricsRequest,
  runtimeConfig: api.RuntimeConfigRequest,
};

export const IMAGE_REQUESTS: Codecs<ImageServiceDefinition> = {
  listImages: api.ListImagesRequest,
  imageStatus: api.ImageStatusRequest,
  pullImage: api.PullImageRequest,
  removeImage: api.RemoveImageRequest,
  imageFsInfo: api.ImageFsInfoRequest,
};
