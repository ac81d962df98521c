/**
 * The eviction manager's admit handler (upstream's managerImpl.Admit): while the node
 * reports a pressure condition, new pods that would make it worse are refused with
 * reason Evicted. Under memory pressure alone, only BestEffort pods are refused (unless
 * they tolerate the memory-pressure taint); under any other pressure every pod is.
 * Critical pods are always admitted, as the node needs them to stay healthy.
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { NodePressure } from '../eviction/types.ts';
import { qosClassOf } from '../container/qos.ts';
import type { PodAdmitHandler } from './types.ts';
import { isCriticalPod, tolerates, type PodAdmitResult } from './predicates.ts';

const MEMORY_PRESSURE_TAINT = {
  key: 'node.kubernetes.io/memory-pressure',
  effect: 'NoSchedule',
} as const;

export function evictionAdmitHandler(pressure: NodePressure): PodAdmitHandler {
  return {
    admit(pod: Pod): PodAdmitResult {
      const conditions = pressure.conditions();
      if (conditions.length === 0 || isCriticalPod(pod)) return { admit: true };
      if (conditions.length === 1 && conditions[0] === 'MemoryPressure') {
        if (qosClassOf(pod) !== 'BestEffort') return { admit: true };
        const tolerations = pod.spec?.tolerations ?? [];
        if (tolerations.some((t) => tolerates(t, MEMORY_PRESSURE_TAINT))) return { admit: true };
      }
      return {
        admit: false,
        reason: 'Evicted',
        // Go's %v of a []NodeConditionType: "[MemoryPressure DiskPressure]".
        message: `The node had condition: [${conditions.join(' ')}]. `,
      };
    },
  };
}
