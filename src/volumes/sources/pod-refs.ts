/**
 * The configMaps and secrets a pod references (upstream's VisitPodConfigmapNames and
 * VisitPodSecretNames): volumes, projected sources, env and envFrom of every container
 * (init and ephemeral too), image pull secrets and the secret refs of volume plugins.
 */
import type { Container, EphemeralContainer, Pod } from 'kubernetes-types/core/v1.js';

export interface PodObjectRefs {
  readonly configMaps: ReadonlySet<string>;
  readonly secrets: ReadonlySet<string>;
}

function addName(set: Set<string>, name: string | undefined): void {
  if (name !== undefined && name !== '') set.add(name);
}

/** The names (in the pod's namespace) of the configMaps and secrets `pod` uses. */
export function podObjectRefs(pod: Pod): PodObjectRefs {
  const configMaps = new Set<string>();
  const secrets = new Set<string>();
  const spec = pod.spec;
  const containers: (Container | EphemeralContainer)[] = [
    ...(spec?.initContainers ?? []),
    ...(spec?.containers ?? []),
    ...(spec?.ephemeralContainers ?? []),
  ];
  for (const c of containers) {
    for (const env of c.env ?? []) {
      addName(configMaps, env.valueFrom?.configMapKeyRef?.name);
      addName(secrets, env.valueFrom?.secretKeyRef?.name);
    }
    for (const from of c.envFrom ?? []) {
      addName(configMaps, from.configMapRef?.name);
      addName(secrets, from.secretRef?.name);
    }
  }
  for (const ref of spec?.imagePullSecrets ?? []) addName(secrets, ref.name);
  for (const v of spec?.volumes ?? []) {
    addName(configMaps, v.configMap?.name);
    addName(secrets, v.secret?.secretName);
    for (const s of v.projected?.sources ?? []) {
      addName(configMaps, s.configMap?.name);
      addName(secrets, s.secret?.name);
    }
    addName(secrets, v.csi?.nodePublishSecretRef?.name);
    addName(secrets, v.flexVolume?.secretRef?.name);
    addName(secrets, v.iscsi?.secretRef?.name);
    addName(secrets, v.rbd?.secretRef?.name);
    addName(secrets, v.cephfs?.secretRef?.name);
    addName(secrets, v.azureFile?.secretName);
  }
  return { configMaps, secrets };
}
