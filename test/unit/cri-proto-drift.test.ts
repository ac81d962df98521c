/**
 * Fails when proto/runtime/v1/api.proto no longer matches the upstream CRI api.proto
 * of the pinned k8s.io/cri-api (read from the Go module cache), field by field.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { compareCriSubset } from '../../hack/cri-proto/compare.ts';
import {
  loadProto,
  pinnedVersions,
  upstreamCriProto,
  type FileDescriptor,
} from '../../hack/cri-proto/descriptor.ts';
import { USED_RPCS } from '../../hack/cri-proto/subset.ts';

const OURS = new URL('../../proto/runtime/v1/api.proto', import.meta.url).pathname;

describe('CRI proto drift', () => {
  let ours: FileDescriptor;
  let upstream: FileDescriptor;

  before(async () => {
    const version = (await pinnedVersions())['CRI_API_VERSION'];
    assert.ok(version, 'versions.env pins CRI_API_VERSION');
    [ours, upstream] = await Promise.all([
      loadProto(OURS),
      upstreamCriProto(version).then(loadProto),
    ]);
  });

  test('our subset matches upstream message by message and field by field', () => {
    assert.deepEqual(compareCriSubset(ours, upstream), []);
  });

  test('the subset defines every RPC berth uses', () => {
    for (const [service, rpcs] of Object.entries(USED_RPCS)) {
      const defined = ours.service.find((s) => s.name === service)?.method.map((m) => m.name) ?? [];
      assert.deepEqual([...defined].sort(), [...rpcs].sort(), service);
    }
  });

  test('a changed field number, a dropped field or a renamed RPC is reported', () => {
    const pod = ours.messageType.find((m) => m.name === 'PodSandboxConfig');
    assert.ok(pod?.field);
    const renumbered: FileDescriptor = {
      ...ours,
      messageType: ours.messageType.map((m) =>
        m === pod
          ? {
              ...m,
              field: (m.field ?? []).map((f) => (f.name === 'hostname' ? { ...f, number: 99 } : f)),
            }
          : m,
      ),
    };
    assert.match(compareCriSubset(renumbered, upstream).join('\n'), /PodSandboxConfig\.hostname/);
    const dropped: FileDescriptor = {
      ...ours,
      messageType: ours.messageType.map((m) =>
        m === pod ? { ...m, field: (m.field ?? []).slice(1) } : m,
      ),
    };
    assert.match(compareCriSubset(dropped, upstream).join('\n'), /is missing from ours/);
    const renamed: FileDescriptor = {
      ...ours,
      service: ours.service.map((s) => ({
        ...s,
        method: s.method.map((m) => (m.name === 'Version' ? { ...m, name: 'Versions' } : m)),
      })),
    };
    assert.match(
      compareCriSubset(renamed, upstream).join('\n'),
      /Versions does not exist upstream/,
    );
  });
});
