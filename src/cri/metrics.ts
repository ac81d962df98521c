/**
 * The CRI client's metrics port. The client sits below the kubelet's metrics (layers in
 * ARCHITECTURE.md), so it declares what it reports and the kubelet's metrics implement it
 * (KubeletMetrics.cri), as upstream's remote runtime service is wrapped by
 * instrumentedRuntimeService.
 */

/** What the client reports after each unary CRI call. */
export interface CriMetrics {
  /**
   * A finished call: `operationType` is upstream's operation_type (criOperationType),
   * `seconds` its duration, `failed` true when it ended in an error.
   */
  observeOperation(operationType: string, seconds: number, failed: boolean): void;
  /** A finished RunPodSandbox call, by the runtime handler it asked for ('' is the default). */
  observeRunPodSandbox(runtimeHandler: string, seconds: number, failed: boolean): void;
}
