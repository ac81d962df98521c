import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renderCadvisorMetrics } from './cadvisor-metrics.ts';
import type { Summary } from './types.ts';

const T = '2026-01-01T00:00:10.000Z';
const MS = Date.parse(T);

describe('/metrics/cadvisor', () => {
  test("containers and the pod cgroup under cAdvisor's names, with sample times", () => {
    const summary: Summary = {
      node: { nodeName: 'n', startTime: T },
      pods: [
        {
          podRef: { name: 'web', namespace: 'ns', uid: 'u' },
          startTime: T,
          cpu: { time: T, usageCoreNanoSeconds: 3e9 },
          memory: { time: T, workingSetBytes: 4096 },
          containers: [
            {
              name: 'app',
              startTime: '2026-01-01T00:00:00.000Z',
              cpu: { time: T, usageCoreNanoSeconds: 2.5e9 },
              memory: { time: T, workingSetBytes: 2048, usageBytes: 3072, rssBytes: 1024 },
              rootfs: { time: T, usedBytes: 512 },
            },
          ],
        },
      ],
    };
    const text = renderCadvisorMetrics(summary, { cpuCores: 2, memoryBytes: 8e9 });
    const lines = text.split('\n');
    for (const expected of [
      `container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 2.5 ${MS}`,
      `container_cpu_usage_seconds_total{container="",namespace="ns",pod="web"} 3 ${MS}`,
      `container_memory_working_set_bytes{container="app",namespace="ns",pod="web"} 2048 ${MS}`,
      `container_memory_working_set_bytes{container="",namespace="ns",pod="web"} 4096 ${MS}`,
      `container_memory_usage_bytes{container="app",namespace="ns",pod="web"} 3072 ${MS}`,
      `container_memory_rss{container="app",namespace="ns",pod="web"} 1024 ${MS}`,
      `container_fs_usage_bytes{container="app",namespace="ns",pod="web"} 512 ${MS}`,
      `container_start_time_seconds{container="app",namespace="ns",pod="web"} ${MS / 1000 - 10} ${MS - 10_000}`,
      'machine_cpu_cores 2',
      'machine_memory_bytes 8000000000',
    ])
      assert.ok(lines.includes(expected), `${expected}\n${text}`);
    // Families in name order, each with HELP and TYPE once.
    const names = lines.filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]);
    assert.deepEqual(names, [...names].sort());
    assert.equal(new Set(names).size, names.length);
    // What the stats do not have is absent, not zero: the pod has no usage or RSS.
    assert.ok(!lines.some((l) => l.startsWith('container_memory_rss{container=""')));
  });
});
