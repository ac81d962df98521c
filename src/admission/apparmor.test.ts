import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import {
  appArmorProfileOf,
  appArmorRejection,
  appArmorRequired,
  hostAppArmorEnabled,
} from './apparmor.ts';

function pod(
  extra: { annotations?: Record<string, string>; spec?: Partial<Pod['spec']> } = {},
): Pod {
  return {
    metadata: {
      name: 'p',
      namespace: 'ns',
      ...(extra.annotations && { annotations: extra.annotations }),
    },
    spec: { containers: [{ name: 'main' }], ...extra.spec },
    status: { phase: 'Pending' },
  };
}

describe('AppArmor', () => {
  test('a pod asks for it with a non-Unconfined profile at either level, or the annotation', () => {
    assert.equal(appArmorRequired(pod()), false);
    assert.equal(
      appArmorRequired(
        pod({ spec: { securityContext: { appArmorProfile: { type: 'Unconfined' } } } }),
      ),
      false,
    );
    assert.equal(
      appArmorRequired(
        pod({ spec: { securityContext: { appArmorProfile: { type: 'RuntimeDefault' } } } }),
      ),
      true,
    );
    assert.equal(
      appArmorRequired(
        pod({
          spec: {
            containers: [{ name: 'main' }],
            initContainers: [
              {
                name: 'init',
                securityContext: { appArmorProfile: { type: 'Localhost', localhostProfile: 'x' } },
              },
            ],
          },
        }),
      ),
      true,
    );
    const annotated = pod({
      annotations: { 'container.apparmor.security.beta.kubernetes.io/main': 'localhost/k8s-deny' },
    });
    assert.equal(appArmorRequired(annotated), true);
    assert.deepEqual(appArmorProfileOf(annotated, { name: 'main' }), {
      type: 'Localhost',
      localhostProfile: 'k8s-deny',
    });
    assert.equal(
      appArmorRequired(
        pod({
          annotations: { 'container.apparmor.security.beta.kubernetes.io/main': 'unconfined' },
        }),
      ),
      false,
    );
  });

  test('the container profile wins over the pod one', () => {
    const p = pod({
      spec: {
        securityContext: { appArmorProfile: { type: 'RuntimeDefault' } },
        containers: [
          { name: 'main', securityContext: { appArmorProfile: { type: 'Unconfined' } } },
        ],
      },
    });
    assert.deepEqual(appArmorProfileOf(p, p.spec?.containers[0] ?? { name: '' }), {
      type: 'Unconfined',
    });
  });

  test('a host without AppArmor refuses pods that ask, with the upstream message', () => {
    const asks = pod({
      spec: { securityContext: { appArmorProfile: { type: 'RuntimeDefault' } } },
    });
    assert.equal(
      appArmorRejection(asks, false),
      'Cannot enforce AppArmor: AppArmor is not enabled on the host',
    );
    assert.equal(appArmorRejection(asks, true), undefined);
    assert.equal(appArmorRejection(pod(), false), undefined);
    // A running pod is not checked again (a berth restart must not reject it).
    assert.equal(appArmorRejection({ ...asks, status: { phase: 'Running' } }, false), undefined);
    const empty = pod({
      spec: {
        containers: [
          {
            name: 'main',
            securityContext: { appArmorProfile: { type: 'Localhost', localhostProfile: ' ' } },
          },
        ],
      },
    });
    assert.match(appArmorRejection(empty, true) ?? '', /invalid empty AppArmor profile name/);
  });

  test('the host check reads securityfs and the module parameter', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-apparmor-'));
    try {
      const sys = { securityfs: join(dir, 'apparmor'), parameter: join(dir, 'enabled') };
      assert.equal(await hostAppArmorEnabled(sys), false);
      await mkdir(sys.securityfs);
      await writeFile(sys.parameter, 'N\n');
      assert.equal(await hostAppArmorEnabled(sys), false);
      await writeFile(sys.parameter, 'Y\n');
      assert.equal(await hostAppArmorEnabled(sys), true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
