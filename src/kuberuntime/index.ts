/**
 * kuberuntime: how berth drives a CRI runtime for a pod (upstream pkg/kubelet/kuberuntime).
 * This folder holds the pure core — observed state, CRI labels and annotations, the spec
 * hash, the per-round sync plan and terminal detection; the sync loop that performs the
 * plan over CRI builds on it.
 */
export * from '../container/pod-status.ts';
export * from '../container/labels.ts';
export * from '../container/restart-policy.ts';
export * from './sandbox-decision.ts';
export * from './plan.ts';
