/**
 * The API server's defaults for a v1 Pod (upstream's SetObjectDefaults_Pod in
 * pkg/apis/core/v1), which a static pod gets when its manifest is decoded: the kubelet
 * then runs, hashes and mirrors the defaulted pod. Covers the fields a pod spec can
 * carry on a node: restart and DNS policy, grace period, security context, scheduler,
 * service links, container pull policy and termination message, ports, probes and
 * handlers, volume sources, downward fields, and requests defaulted from limits.
 * Feature-gated defaults that are off in v1.37 (H2C probe protocol, pod-level
 * resources) are not applied, as upstream's default gates do not.
 */
import type {
  Container,
  HTTPGetAction,
  LifecycleHandler,
  Pod,
  PodSpec,
  Probe,
  Volume,
} from 'kubernetes-types/core/v1.js';

/** Upstream's ParseImageName tag: "latest" when none is given and no digest pins it. */
function imageTag(image: string): string {
  if (image.includes('@')) return '';
  const lastSlash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  return colon > lastSlash ? image.slice(colon + 1) : 'latest';
}

function defaultHttpGet(h: HTTPGetAction | undefined): void {
  if (h === undefined) return;
  if (h.path === undefined || h.path === '') h.path = '/';
  if (h.scheme === undefined || h.scheme === '') h.scheme = 'HTTP';
}

function defaultProbe(p: Probe | undefined): void {
  if (p === undefined) return;
  if (!p.timeoutSeconds) p.timeoutSeconds = 1;
  if (!p.periodSeconds) p.periodSeconds = 10;
  if (!p.successThreshold) p.successThreshold = 1;
  if (!p.failureThreshold) p.failureThreshold = 3;
  defaultHttpGet(p.httpGet);
  if (p.grpc !== undefined) p.grpc.service ??= '';
}

function defaultHandler(h: LifecycleHandler | undefined): void {
  defaultHttpGet(h?.httpGet);
}

function defaultContainer(c: Container, hostNetwork: boolean): void {
  // Go serializes the (non-pointer) resources struct even when empty.
  const resources = (c.resources ??= {});
  // SetDefaults_Pod first: requests default to limits, host-network ports to the container port.
  const limits = resources.limits;
  if (limits != null) {
    const requests = (resources.requests ??= {});
    for (const [k, v] of Object.entries(limits)) if (!(k in requests)) requests[k] = v;
  }
  if (hostNetwork) for (const p of c.ports ?? []) if (!p.hostPort) p.hostPort = p.containerPort;
  if (c.imagePullPolicy === undefined || c.imagePullPolicy === '')
    c.imagePullPolicy = imageTag(c.image ?? '') === 'latest' ? 'Always' : 'IfNotPresent';
  if (!c.terminationMessagePath) c.terminationMessagePath = '/dev/termination-log';
  if (!c.terminationMessagePolicy) c.terminationMessagePolicy = 'File';
  for (const p of c.ports ?? []) if (!p.protocol) p.protocol = 'TCP';
  for (const e of c.env ?? []) {
    const ref = e.valueFrom?.fieldRef;
    if (ref !== undefined && !ref.apiVersion) ref.apiVersion = 'v1';
    const fileKeyRef = (e.valueFrom as { fileKeyRef?: { optional?: boolean } } | undefined)
      ?.fileKeyRef;
    if (fileKeyRef !== undefined) fileKeyRef.optional ??= false;
  }
  defaultProbe(c.livenessProbe);
  defaultProbe(c.readinessProbe);
  defaultProbe(c.startupProbe);
  defaultHandler(c.lifecycle?.postStart);
  defaultHandler(c.lifecycle?.preStop);
}

const VOLUME_SOURCES_WITHOUT_EMPTYDIR_DEFAULT = new Set(['name']);

function defaultVolume(v: Volume): void {
  const sources = Object.keys(v).filter(
    (k) => !VOLUME_SOURCES_WITHOUT_EMPTYDIR_DEFAULT.has(k) && v[k as keyof Volume] != null,
  );
  if (sources.length === 0) v.emptyDir = {};
  // The ImageVolume gate is on in v1.37: an image volume's pull policy is defaulted too.
  const image = (v as { image?: { reference?: string; pullPolicy?: string } }).image;
  if (image != null && !image.pullPolicy)
    image.pullPolicy = imageTag(image.reference ?? '') === 'latest' ? 'Always' : 'IfNotPresent';
  if (v.hostPath !== undefined) v.hostPath.type ??= '';
  if (v.secret !== undefined) v.secret.defaultMode ??= 0o644;
  if (v.configMap !== undefined) v.configMap.defaultMode ??= 0o644;
  if (v.downwardAPI !== undefined) {
    v.downwardAPI.defaultMode ??= 0o644;
    for (const item of v.downwardAPI.items ?? [])
      if (item.fieldRef !== undefined && !item.fieldRef.apiVersion) item.fieldRef.apiVersion = 'v1';
  }
  if (v.projected !== undefined) {
    v.projected.defaultMode ??= 0o644;
    for (const s of v.projected.sources ?? []) {
      for (const item of s.downwardAPI?.items ?? [])
        if (item.fieldRef !== undefined && !item.fieldRef.apiVersion)
          item.fieldRef.apiVersion = 'v1';
      if (s.serviceAccountToken !== undefined) s.serviceAccountToken.expirationSeconds ??= 3600;
    }
  }
}

function defaultSpec(spec: PodSpec): void {
  if (spec.terminationGracePeriodSeconds != null && spec.terminationGracePeriodSeconds < 0)
    spec.terminationGracePeriodSeconds = 1;
  spec.enableServiceLinks ??= true;
  if (!spec.serviceAccountName) spec.serviceAccountName = spec.serviceAccount ?? '';
  spec.serviceAccount = spec.serviceAccountName;
  if (spec.serviceAccountName === '') {
    delete spec.serviceAccountName;
    delete spec.serviceAccount;
  }
  if (!spec.dnsPolicy) spec.dnsPolicy = 'ClusterFirst';
  if (!spec.restartPolicy) spec.restartPolicy = 'Always';
  spec.securityContext ??= {};
  spec.terminationGracePeriodSeconds ??= 30;
  if (!spec.schedulerName) spec.schedulerName = 'default-scheduler';
  for (const v of spec.volumes ?? []) defaultVolume(v);
  const hostNetwork = spec.hostNetwork === true;
  for (const c of spec.initContainers ?? []) defaultContainer(c, hostNetwork);
  for (const c of spec.containers) defaultContainer(c, hostNetwork);
}

/** Applies the API's defaults to `pod` in place (a freshly decoded manifest). */
export function applyApiDefaults(pod: Pod): void {
  if (pod.spec !== undefined) defaultSpec(pod.spec);
}
