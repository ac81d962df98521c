/**
 * Fails when proto/csi/v1/csi.proto or proto/pluginregistration/v1/api.proto no longer
 * matches upstream (the pinned CSI spec and k8s.io/kubelet, read from the Go module
 * cache), field by field, or no longer defines an RPC berth calls.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compareCriSubset } from '../../hack/cri-proto/compare.ts';
import { loadProto } from '../../hack/cri-proto/descriptor.ts';
import { SOURCES, sourceVersion, upstreamModuleFile } from '../../hack/cri-proto/csi-subset.ts';

describe('CSI and plugin registration proto drift', () => {
  for (const source of SOURCES) {
    test(`${source.target} matches ${source.module} and defines every RPC berth uses`, async () => {
      const version = await sourceVersion(source);
      const [ours, upstream] = await Promise.all([
        loadProto(new URL(`../../${source.target}`, import.meta.url).pathname),
        upstreamModuleFile(source.module, version, source.path).then(loadProto),
      ]);
      assert.deepEqual(compareCriSubset(ours, upstream), []);
      for (const [service, rpcs] of Object.entries(source.usedRpcs)) {
        const defined = ours.service.find((s) => s.name === service)?.method.map((m) => m.name);
        assert.deepEqual([...(defined ?? [])].sort(), [...rpcs].sort(), service);
      }
      // The test can fail: a renumbered field is reported.
      const first = ours.messageType.find((m) => (m.field ?? []).length > 0);
      assert.ok(first);
      const renumbered = {
        ...ours,
        messageType: ours.messageType.map((m) =>
          m === first
            ? { ...m, field: (m.field ?? []).map((f, i) => (i === 0 ? { ...f, number: 99 } : f)) }
            : m,
        ),
      };
      assert.notDeepEqual(compareCriSubset(renumbered, upstream), []);
    });
  }
});
