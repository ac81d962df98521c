/**
 * /metrics of a running berth, scraped as Prometheus does (the apiserver's kubelet
 * client certificate, straight to :10250): each kubelet_* series upstream's dashboards
 * use is there and moves as pods start (issue #34: these were built but never wired).
 * Volume usage (issue #29): an emptyDir's files show in /stats/summary, read through the
 * API server's node proxy, within volumeStatsAggPeriod (2 s here), and a claim's volume
 * (a local PV, statfs) in the kubelet_volume_stats_* gauges.
 */
import assert from 'node:assert/strict';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import { callBerth, type ClientCert } from '../harness/kubelet-api-client.ts';
import type { Summary } from '../../src/stats/types.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  waitForPod,
} from '../harness/kube-helpers.ts';

/** The value of one sample line, e.g. `kubelet_running_pods` or `x{a="b"}`; 0 when absent. */
function sample(text: string, series: string): number {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return 0;
}

describe('kubelet metrics from a running berth', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let port: { host: string; port: number };
  let ca: Buffer;
  let client: ClientCert;
  const scrape = async (): Promise<string> => {
    const r = await callBerth(port, ca, '/metrics', client);
    assert.equal(r.status, 200);
    return r.body;
  };

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    // On the pod bridge's gateway, not loopback: the API server refuses to proxy to a
    // loopback node, and /stats/summary is read through its node proxy.
    berth = await startBerth(cluster, {
      nodeIp: cluster.runtime.gateway,
      extraConfig: ['volumeStatsAggPeriod: 2s'],
    });
    port = {
      host: cluster.runtime.gateway,
      port: Number(/^port: (\d+)$/m.exec(await readFile(berth.configFile, 'utf8'))?.[1]),
    };
    ca = await readFile(cluster.pki.ca.cert);
    client = {
      cert: await readFile(cluster.pki.kubeletClient.cert),
      key: await readFile(cluster.pki.kubeletClient.key),
    };
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  test('pod and container series move as pods start', async () => {
    // The API listens once berth's start-up is through (the node may register first).
    const before = await eventually('the kubelet API', () => scrape().catch(() => undefined));
    await applyJson(cluster, busyboxPod(cluster, 'one', berth.nodeName));
    await applyJson(cluster, {
      ...busyboxPod(cluster, 'init', berth.nodeName),
      spec: {
        ...busyboxPod(cluster, 'init', berth.nodeName).spec,
        initContainers: [
          {
            name: 'prepare',
            image: cluster.images.busyboxLocal,
            imagePullPolicy: 'IfNotPresent',
            command: ['true'],
          },
        ],
      },
    });
    await applyJson(
      cluster,
      busyboxPod(cluster, 'no-image', berth.nodeName, {
        image: `${cluster.images.busyboxLocal}-does-not-exist`,
      }),
    );
    await waitForPod(cluster, 'default', 'one', 'running', isRunningAndReady);
    await waitForPod(cluster, 'default', 'init', 'running', isRunningAndReady);
    const text = await eventually('the running pods counted', async () => {
      const t = await scrape();
      return sample(t, 'kubelet_running_pods') >= 3 ? t : undefined;
    });
    const grew = (series: string, by: number) => {
      assert.ok(
        sample(text, series) - sample(before, series) >= by,
        `${series}: ${String(sample(before, series))} -> ${String(sample(text, series))}`,
      );
    };
    // Three sandboxes ready (the pod whose image is missing has one too).
    grew('kubelet_running_pods', 3);
    grew('kubelet_running_containers{container_state="running"}', 2);
    grew('kubelet_running_containers{container_state="exited"}', 1);
    grew('kubelet_started_pods_total', 3);
    grew('kubelet_started_containers_total{container_type="container"}', 3);
    grew('kubelet_started_containers_total{container_type="init_container"}', 1);
    grew(
      'kubelet_started_containers_errors_total{container_type="container",code="ErrImagePull"}',
      1,
    );
    grew('kubelet_run_podsandbox_duration_seconds_count{runtime_handler=""}', 3);
    grew('kubelet_pod_start_duration_seconds_count', 2);
    grew('kubelet_pod_worker_duration_seconds_count{operation_type="create"}', 3);
    assert.ok(sample(text, 'kubelet_pleg_relist_duration_seconds_count') > 0);
    assert.ok(
      sample(text, 'kubelet_runtime_operations_total{operation_type="run_podsandbox"}') >= 3,
      'runtime operations are counted per CRI method',
    );
  });

  test("an emptyDir's usage shows in /stats/summary within volumeStatsAggPeriod", async () => {
    const MiB = 1024 * 1024;
    const base = busyboxPod(cluster, 'scratch', berth.nodeName, {
      command: ['sh', '-c', 'dd if=/dev/urandom of=/scratch/blob bs=1024 count=3072 && sleep 3600'],
    });
    const pod: Pod = {
      ...base,
      spec: {
        ...base.spec,
        containers: (base.spec?.containers ?? []).map((c) => ({
          ...c,
          volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
        })),
        volumes: [{ name: 'scratch', emptyDir: {} }],
      },
    };
    await applyJson(cluster, pod);
    await waitForPod(cluster, 'default', 'scratch', 'running', isRunningAndReady);
    const started = Date.now();
    const summaryPath = `/api/v1/nodes/${berth.nodeName}/proxy/stats/summary`;
    const stats = await eventually(
      'the emptyDir measured',
      async () => {
        const summary = JSON.parse(await cluster.kubectl(['get', '--raw', summaryPath])) as Summary;
        const p = summary.pods.find(
          (x) => x.podRef.name === 'scratch' && x.podRef.namespace === 'default',
        );
        const v = p?.volume?.find((x) => x.name === 'scratch');
        return v !== undefined && (v.usedBytes ?? 0) >= 3 * MiB ? { pod: p, volume: v } : undefined;
      },
      30_000,
      500,
    );
    // The pod was running before the file was complete: one or two periods and a scrape.
    assert.ok(Date.now() - started < 15_000, `measured after ${String(Date.now() - started)} ms`);
    const v = stats.volume;
    assert.equal(v.pvcRef, undefined);
    assert.ok((v.capacityBytes ?? 0) > (v.usedBytes ?? 0), 'capacity from statfs');
    assert.ok((v.availableBytes ?? 0) > 0 && (v.inodes ?? 0) > 0 && (v.inodesFree ?? 0) > 0);
    assert.ok((v.inodesUsed ?? 0) >= 2, 'the volume directory and the file');
    assert.ok(
      (stats.pod?.['ephemeral-storage']?.usedBytes ?? 0) >= 3 * MiB,
      'an emptyDir counts towards the pod ephemeral-storage',
    );
  });

  test('a claim on a local PV shows in kubelet_volume_stats_* and with its pvcRef', async () => {
    const path = join(berth.dir, 'local-pv');
    await mkdir(path, { recursive: true });
    // Pre-bound both ways, so the controller manager's binder only confirms it.
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: 'stats-local-pv' },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        storageClassName: '',
        local: { path },
        claimRef: { namespace: 'default', name: 'stats-claim' },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: 'kubernetes.io/hostname', operator: 'In', values: [berth.nodeName] },
                ],
              },
            ],
          },
        },
      },
    });
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'stats-claim', namespace: 'default' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: '',
        volumeName: 'stats-local-pv',
        resources: { requests: { storage: '1Gi' } },
      },
    });
    const base = busyboxPod(cluster, 'claimed', berth.nodeName);
    await applyJson(cluster, {
      ...base,
      spec: {
        ...base.spec,
        containers: (base.spec?.containers ?? []).map((c) => ({
          ...c,
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
        })),
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'stats-claim' } }],
      },
    } satisfies Pod);
    await waitForPod(cluster, 'default', 'claimed', 'running', isRunningAndReady, 90_000);
    const series = (name: string) =>
      `kubelet_volume_stats_${name}{namespace="default",persistentvolumeclaim="stats-claim"}`;
    const text = await eventually(
      'the claim in kubelet_volume_stats_*',
      async () => {
        const t = await scrape();
        return sample(t, series('capacity_bytes')) > 0 ? t : undefined;
      },
      30_000,
      500,
    );
    // statfs of the filesystem holding the local path.
    assert.ok(sample(text, series('used_bytes')) > 0);
    assert.ok(sample(text, series('available_bytes')) > 0);
    assert.ok(sample(text, series('inodes')) > 0);
    assert.ok(sample(text, series('inodes_used')) > 0);
    assert.ok(sample(text, series('inodes_free')) > 0);
    assert.match(
      text,
      /^kubelet_volume_metric_collection_duration_seconds_count\{metric_source="statfs"\} [1-9]/m,
    );
    const summary = JSON.parse(
      await cluster.kubectl([
        'get',
        '--raw',
        `/api/v1/nodes/${berth.nodeName}/proxy/stats/summary`,
      ]),
    ) as Summary;
    const pod = summary.pods.find((p) => p.podRef.name === 'claimed');
    assert.deepEqual(
      pod?.volume?.map((v) => [v.name, v.pvcRef]),
      [['data', { name: 'stats-claim', namespace: 'default' }]],
    );
    // Unmounted by berth before the node stops (no mount left behind).
    await cluster.kubectl(['delete', 'pod', 'claimed', '--wait=true', '--timeout=60s']);
  });
});
