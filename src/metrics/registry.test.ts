import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cri } from '../cri/index.ts';
import type { RuntimePodSnapshot } from '../container/pod-status.ts';
import type { PodVolumeStats, VolumeStats } from '../stats/types.ts';
import {
  recordContainerStarted,
  recordPodStartDuration,
  recordPodStarted,
  recordRunPodSandbox,
  runtimeCounts,
} from './pod-metrics.ts';
import { exponentialBuckets, imageSizeBucket, KubeletMetrics } from './registry.ts';

describe('kubelet metrics', () => {
  test('upstream names, types, labels and buckets', async () => {
    const m = new KubeletMetrics({ nodeName: 'node-a' });
    m.podWorkerDuration.observe({ operation_type: 'sync' }, 0.2);
    m.runtimeOperationsDuration.observe({ operation_type: 'list_containers' }, 0.001);
    m.imagePullDuration.observe({ image_size_in_bytes: imageSizeBucket(50 * 1024 * 1024) }, 12);
    const text = await m.registry.metrics();
    assert.match(text, /^kubelet_node_name\{node="node-a"\} 1$/m);
    assert.match(text, /^# TYPE kubelet_pod_worker_duration_seconds histogram$/m);
    assert.match(
      text,
      /^kubelet_pod_worker_duration_seconds_bucket\{le="0\.25",operation_type="sync"\} 1$/m,
    );
    assert.match(
      text,
      /^kubelet_runtime_operations_duration_seconds_bucket\{le="0\.005",operation_type="list_containers"\} 1$/m,
    );
    assert.match(
      text,
      /^kubelet_image_pull_duration_seconds_bucket\{le="20",image_size_in_bytes="10MB-100MB"\} 1$/m,
    );
    for (const name of [
      'kubelet_pleg_relist_duration_seconds',
      'kubelet_pleg_relist_interval_seconds',
      'kubelet_pod_start_duration_seconds',
      'kubelet_http_requests_duration_seconds',
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${name} histogram$`, 'm'), name);
    }
    assert.match(text, /^# TYPE kubelet_runtime_operations_total counter$/m);
    assert.match(text, /^# TYPE kubelet_pleg_last_seen_seconds gauge$/m);
    // Probe metrics live in their own registry (/metrics/probes).
    assert.doesNotMatch(text, /prober_probe_total/);
  });

  test('kubelet_volume_stats_* report each claim once, read from the source at scrape time', async () => {
    const m = new KubeletMetrics();
    const vol = (name: string, used: number, claim?: string): VolumeStats => ({
      name,
      time: '2026-01-01T00:00:00.000Z',
      capacityBytes: 1000,
      availableBytes: 1000 - used,
      usedBytes: used,
      inodes: 50,
      inodesFree: 40,
      inodesUsed: 10,
      ...(claim !== undefined && { pvcRef: { name: claim, namespace: 'ns' } }),
    });
    let pods: PodVolumeStats[] = [
      { ephemeral: [vol('scratch', 5)], persistent: [vol('data', 300, 'claim-a')] },
      { ephemeral: [], persistent: [vol('shared', 999, 'claim-a'), vol('b', 1, 'claim-b')] },
    ];
    m.observeVolumes(() => pods);
    m.volumeStatCalDuration.observe({ metric_source: 'du' }, 0.002);
    let text = await m.registry.metrics();
    assert.match(text, /^# TYPE kubelet_volume_stats_used_bytes gauge$/m);
    assert.match(
      text,
      /^kubelet_volume_stats_used_bytes\{namespace="ns",persistentvolumeclaim="claim-a"\} 300$/m,
    );
    assert.match(
      text,
      /^kubelet_volume_stats_capacity_bytes\{namespace="ns",persistentvolumeclaim="claim-b"\} 1000$/m,
    );
    assert.match(
      text,
      /^kubelet_volume_stats_available_bytes\{namespace="ns",persistentvolumeclaim="claim-a"\} 700$/m,
    );
    assert.match(
      text,
      /^kubelet_volume_stats_inodes\{namespace="ns",persistentvolumeclaim="claim-a"\} 50$/m,
    );
    assert.match(
      text,
      /^kubelet_volume_stats_inodes_free\{namespace="ns",persistentvolumeclaim="claim-a"\} 40$/m,
    );
    assert.match(
      text,
      /^kubelet_volume_stats_inodes_used\{namespace="ns",persistentvolumeclaim="claim-a"\} 10$/m,
    );
    // The first pod using a claim gives its numbers; volumes without a claim are left out.
    assert.doesNotMatch(text, /scratch|persistentvolumeclaim="claim-a"\} 999$/m);
    assert.match(
      text,
      /^kubelet_volume_metric_collection_duration_seconds_bucket\{le="0\.005",metric_source="du"\} 1$/m,
    );
    pods = [];
    text = await m.registry.metrics();
    assert.doesNotMatch(text, /persistentvolumeclaim=/);
  });

  test('bucket helpers match upstream', () => {
    assert.deepEqual(exponentialBuckets(0.005, 2.5, 3), [0.005, 0.0125, 0.03125]);
    assert.equal(exponentialBuckets(0.005, 2.5, 14).length, 14);
    assert.equal(imageSizeBucket(0), 'N/A');
    assert.equal(imageSizeBucket(1), '0-10MB');
    assert.equal(imageSizeBucket(10 * 1024 * 1024), '0-10MB');
    assert.equal(imageSizeBucket(10 * 1024 * 1024 + 1), '10MB-100MB');
    assert.equal(imageSizeBucket(200 * 1024 ** 3), 'GT100GB');
  });

  test('the prober records totals for every result and durations of successful probes', async () => {
    const m = new KubeletMetrics();
    const base = {
      probeType: 'Readiness',
      namespace: 'ns',
      pod: 'p',
      podUID: 'u1',
      container: 'c',
      durationSeconds: 0.02,
    } as const;
    m.prober.record({ ...base, result: 'successful' });
    m.prober.record({ ...base, result: 'successful' });
    m.prober.record({ ...base, result: 'failed', durationSeconds: 1 });
    const text = await m.probesRegistry.metrics();
    assert.match(
      text,
      /^prober_probe_total\{probe_type="Readiness",result="successful",container="c",pod="p",namespace="ns",pod_uid="u1"\} 2$/m,
    );
    assert.match(text, /^prober_probe_total\{probe_type="Readiness",result="failed",.*\} 1$/m);
    assert.match(
      text,
      /^prober_probe_duration_seconds_count\{probe_type="Readiness",container="c",pod="p",namespace="ns"\} 2$/m,
    );
    // The pod is gone: its series too (the churn soak found one kept per pod ever probed).
    m.prober.record({ ...base, pod: 'other', podUID: 'u2', result: 'successful' });
    m.prober.forgetPod('u1');
    const after = await m.probesRegistry.metrics();
    assert.doesNotMatch(after, /pod="p"/);
    assert.match(after, /^prober_probe_total\{.*pod="other",namespace="ns",pod_uid="u2"\} 1$/m);
    assert.match(after, /^prober_probe_duration_seconds_count\{.*pod="other",namespace="ns"\} 1$/m);
  });

  test('pod-sync helpers and the runtime gauges', async () => {
    const m = new KubeletMetrics();
    recordPodStarted(m);
    recordPodStarted(m, false);
    recordContainerStarted(m, 'init_container');
    recordContainerStarted(m, 'container', { code: 'Unknown' });
    recordRunPodSandbox(m, '', 0.3);
    recordPodStartDuration(m, 1000, 4000);
    // Absent metrics are a no-op, not an error.
    recordPodStarted(undefined);
    recordContainerStarted(undefined, 'container');
    const snapshot: RuntimePodSnapshot = {
      uid: 'u1',
      sandboxes: [cri.PodSandbox.fromPartial({ state: cri.PodSandboxState.SANDBOX_READY })],
      containers: [
        cri.Container.fromPartial({ state: cri.ContainerState.CONTAINER_RUNNING }),
        cri.Container.fromPartial({ state: cri.ContainerState.CONTAINER_EXITED }),
      ],
    };
    const cache = { uids: () => ['u1'], get: () => snapshot };
    m.observeRuntime(() => runtimeCounts(cache));
    const text = await m.registry.metrics();
    assert.match(text, /^kubelet_started_pods_total 1$/m);
    assert.match(text, /^kubelet_started_pods_errors_total 1$/m);
    assert.match(text, /^kubelet_started_containers_total\{container_type="container"\} 1$/m);
    assert.match(
      text,
      /^kubelet_started_containers_errors_total\{container_type="container",code="Unknown"\} 1$/m,
    );
    assert.match(text, /^kubelet_run_podsandbox_duration_seconds_count\{runtime_handler=""\} 1$/m);
    assert.match(text, /^kubelet_pod_start_duration_seconds_bucket\{le="3"\} 1$/m);
    assert.match(text, /^kubelet_running_pods 1$/m);
    assert.match(text, /^kubelet_running_containers\{container_state="running"\} 1$/m);
    assert.match(text, /^kubelet_running_containers\{container_state="exited"\} 1$/m);
  });
});
