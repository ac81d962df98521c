/**
 * The API pod source as the kubelet uses it (upstream's config source "api",
 * NewSourceApiserver): the pods bound to this node, handed to a consumer as add /
 * update / remove, with full re-lists turned into the precise differences. ApiPodSource
 * (api-source.ts) lists and watches through the reflector; FakePodSource (fake.ts) is
 * fed by the test; both pass contract.ts. The file and URL sources report whole sets to
 * PodConfig (config.ts), which merges every source for the kubelet.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';

/** Where a source's changes go (upstream's ADD / UPDATE / REMOVE of a PodUpdate). */
export interface PodSourceConsumer {
  add(pod: Pod): void;
  update(pod: Pod): void;
  remove(pod: Pod): void;
}

export interface PodSource {
  /** True once the first full list has been delivered: only then may orphans be killed. */
  readonly synced: boolean;
  /** The pods the API binds to this node, by UID. */
  pods(): ReadonlyMap<string, Pod>;
  /** Why the source is failing (5 errors in a row), or undefined. */
  healthProblem(): string | undefined;
  /** Lists, then watches, recovering from errors, until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
}
