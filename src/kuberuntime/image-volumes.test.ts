import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import type { EnsureImageResult } from '../images/manager.ts';
import {
  IMAGE_VOLUME_MOUNT_FAILED,
  imageVolumeFailure,
  imageVolumeMount,
  imageVolumeMountCounts,
  imageVolumeUnsupported,
  pullImageVolumes,
  type ImageVolumePulls,
} from './image-volumes.ts';

const spec = cri.ImageSpec.fromPartial({ image: 'sha256:abc', userSpecifiedImage: 'data:1' });
const container: Container = { name: 'main', image: 'busybox' };
const signal = new AbortController().signal;

function pod(volumes: unknown[]): Pod {
  return {
    metadata: { name: 'p', namespace: 'ns', uid: 'u1', annotations: { a: 'b' } },
    spec: { containers: [container], volumes: volumes as never },
  };
}

describe('pullImageVolumes', () => {
  test('pulls each image volume as a container image with its policy; failures recorded', async () => {
    const calls: { image: string | undefined; policy: string | undefined; target: string }[] = [];
    const images = {
      ensureImage: (
        _pod: Pod,
        c: Container,
        _secrets: unknown,
        _sandbox: unknown,
        target: { kind: string },
      ): Promise<EnsureImageResult> => {
        calls.push({ image: c.image, policy: c.imagePullPolicy, target: target.kind });
        return Promise.resolve(
          c.image === 'missing'
            ? { ok: false, reason: 'ErrImagePull', message: 'Failed to pull image "missing": no' }
            : { ok: true, imageRef: `sha256:${c.image ?? ''}`, image: c.image ?? '' },
        );
      },
    };
    const p = pod([
      { name: 'data', image: { reference: 'data:1', pullPolicy: 'Never' } },
      { name: 'cm', configMap: { name: 'x' } },
      { name: 'gone', image: { reference: 'missing' } },
    ]);
    const pulls = await pullImageVolumes(
      images,
      p,
      [],
      undefined,
      { kind: 'Pod' } as never,
      signal,
    );
    assert.deepEqual(calls, [
      { image: 'data:1', policy: 'Never', target: 'Pod' },
      { image: 'missing', policy: undefined, target: 'Pod' },
    ]);
    assert.deepEqual([...pulls.keys()], ['data', 'gone']);
    const data = pulls.get('data');
    assert.ok(data?.ok === true);
    assert.equal(data.spec.image, 'sha256:data:1');
    assert.equal(data.spec.userSpecifiedImage, 'data:1');
    assert.deepEqual(data.spec.annotations, { a: 'b' });
    assert.equal(pulls.get('gone')?.ok, false);
  });
});

describe('imageVolumeFailure', () => {
  const pulls: ImageVolumePulls = new Map([
    ['ok', { ok: true, spec }],
    ['bad', { ok: false, reason: 'ImagePullBackOff', message: 'Back-off pulling image "x"' }],
  ]);
  test('only a failed volume the container mounts stops it', () => {
    assert.equal(imageVolumeFailure(pulls, container), undefined);
    assert.equal(
      imageVolumeFailure(pulls, { ...container, volumeMounts: [{ name: 'ok', mountPath: '/a' }] }),
      undefined,
    );
    const f = imageVolumeFailure(pulls, {
      ...container,
      volumeMounts: [
        { name: 'ok', mountPath: '/a' },
        { name: 'bad', mountPath: '/b' },
      ],
    });
    assert.equal(f?.reason, 'ImagePullBackOff');
  });
});

describe('imageVolumeMount', () => {
  test('read-only image mount with no host path, whatever the volumeMount says', () => {
    const m = imageVolumeMount(
      { name: 'v', mountPath: '/data', readOnly: false },
      container,
      spec,
      new Map(),
    );
    assert.equal(m.readonly, true);
    assert.equal(m.hostPath, '');
    assert.equal(m.containerPath, '/data');
    assert.equal(m.image?.image, 'sha256:abc');
    assert.equal(m.imageSubPath, '');
    assert.equal(m.propagation, cri.MountPropagation.PROPAGATION_PRIVATE);
  });
  test('subPath and subPathExpr go to image_sub_path, checked as other subPaths', () => {
    const env = new Map([['DIR', 'etc']]);
    assert.equal(
      imageVolumeMount({ name: 'v', mountPath: '/d', subPath: 'etc' }, container, spec, env)
        .imageSubPath,
      'etc',
    );
    assert.equal(
      imageVolumeMount(
        { name: 'v', mountPath: '/d', subPathExpr: '$(DIR)/x' },
        container,
        spec,
        env,
      ).imageSubPath,
      'etc/x',
    );
    assert.throws(() =>
      imageVolumeMount({ name: 'v', mountPath: '/d', subPath: '../etc' }, container, spec, env),
    );
    assert.throws(() =>
      imageVolumeMount({ name: 'v', mountPath: '/d', subPath: '/etc' }, container, spec, env),
    );
    assert.throws(() =>
      imageVolumeMount(
        { name: 'v', mountPath: '/d', subPath: 'a', subPathExpr: 'b' },
        container,
        spec,
        env,
      ),
    );
  });
  test('Bidirectional only for privileged containers', () => {
    const vm = { name: 'v', mountPath: '/d', mountPropagation: 'Bidirectional' };
    assert.throws(() => imageVolumeMount(vm, container, spec, new Map()), /privileged/);
    const privileged = { ...container, securityContext: { privileged: true } };
    assert.equal(
      imageVolumeMount(vm, privileged, spec, new Map()).propagation,
      cri.MountPropagation.PROPAGATION_BIDIRECTIONAL,
    );
  });
});

describe('imageVolumeUnsupported', () => {
  const whole = cri.Mount.fromPartial({ containerPath: '/data', image: spec, readonly: true });
  const sub = cri.Mount.fromPartial({ ...whole, containerPath: '/etc2', imageSubPath: 'etc' });
  const host = cri.Mount.fromPartial({ containerPath: '/h', hostPath: '/tmp' });
  const containerd = (v: string): { runtimeName: string; runtimeVersion: string } => ({
    runtimeName: 'containerd',
    runtimeVersion: v,
  });
  test('containerd 1.6 and 2.0 cannot mount images', () => {
    for (const v of ['1.6.20-berth-fake', 'v1.7.0', 'v2.0.5']) {
      const msg = imageVolumeUnsupported(containerd(v), [host, whole]) ?? '';
      assert.ok(msg.startsWith(`${IMAGE_VOLUME_MOUNT_FAILED}: `), msg);
      assert.match(msg, /containerd 2\.1 or later/);
      assert.match(msg, /\/data/);
    }
  });
  test('containerd 2.1 mounts images but not their subPaths; 2.2 and later both', () => {
    assert.equal(imageVolumeUnsupported(containerd('v2.1.4'), [whole]), undefined);
    const msg = imageVolumeUnsupported(containerd('v2.1.4'), [whole, sub]) ?? '';
    assert.match(
      msg,
      /a subPath of an image volume \(mountPath \/etc2\): it needs containerd 2\.2 or later/,
    );
    assert.equal(imageVolumeUnsupported(containerd('v2.2.0'), [whole, sub]), undefined);
    assert.equal(imageVolumeUnsupported(containerd('v2.4.2-berth-fake'), [sub]), undefined);
  });
  test('no image mount, another runtime or an unparsable version: nothing to say', () => {
    assert.equal(imageVolumeUnsupported(containerd('1.6.20'), [host]), undefined);
    assert.equal(
      imageVolumeUnsupported({ runtimeName: 'cri-o', runtimeVersion: '1.30.0' }, [whole]),
      undefined,
    );
    assert.equal(imageVolumeUnsupported(containerd('devel'), [whole]), undefined);
  });
});

describe('imageVolumeMountCounts (upstream incrementImageVolumeMetrics)', () => {
  const pulls: ImageVolumePulls = new Map([
    ['a', { ok: true, spec }],
    ['b', { ok: true, spec }],
    ['bad', { ok: false, reason: 'ErrImagePull', message: 'no' }],
  ]);
  const mounting = (...names: string[]): Container => ({
    ...container,
    volumeMounts: names.map((name, i) => ({ name, mountPath: `/m${i}` })),
  });
  test('volumes requested once, each mount counted', () => {
    assert.deepEqual(imageVolumeMountCounts(pulls, mounting('a', 'a', 'b', 'cm'), undefined), {
      requested: 2,
      succeeded: 3,
      failed: 0,
    });
    assert.deepEqual(imageVolumeMountCounts(pulls, mounting(), undefined), {
      requested: 0,
      succeeded: 0,
      failed: 0,
    });
  });
  test('a CreateContainerError starting ImageVolumeMountFailed counts the mounts as failed', () => {
    const failure = { reason: 'CreateContainerError', message: `${IMAGE_VOLUME_MOUNT_FAILED}: x` };
    assert.deepEqual(imageVolumeMountCounts(pulls, mounting('a', 'b'), failure), {
      requested: 2,
      succeeded: 0,
      failed: 2,
    });
    // Any other failure (here the container's own image) still counts as mounted, as upstream.
    assert.deepEqual(
      imageVolumeMountCounts(pulls, mounting('a'), { reason: 'ErrImagePull', message: 'x' }),
      { requested: 1, succeeded: 1, failed: 0 },
    );
  });
  test('a start stopped by a failed volume pull is not counted', () => {
    assert.equal(imageVolumeMountCounts(pulls, mounting('a', 'bad'), undefined), undefined);
  });
});
