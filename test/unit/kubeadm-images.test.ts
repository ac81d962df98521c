/**
 * hack/images/kubeadm.ts builds an image only under a tag that names the binary it
 * holds: kubeadm's references at other versions are refused before anything is built,
 * naming what to change.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildKubeadmImages } from '../../hack/images/kubeadm.ts';
import { pinnedVersions } from '../harness/binaries.ts';

describe("kubeadm's images", () => {
  it('refuses a Kubernetes image at another version than KUBERNETES_VERSION', async () => {
    const pinned = pinnedVersions()['KUBERNETES_VERSION'] ?? '';
    await assert.rejects(
      buildKubeadmImages(['registry.k8s.io/kube-apiserver:v1.30.0']),
      new RegExp(
        `the project's binary is ${pinned.replaceAll('.', '\\.')}, not v1\\.30\\.0; .*KUBERNETES_VERSION`,
      ),
    );
  });

  it('refuses etcd and CoreDNS tags their build modules do not pin, naming the module', async () => {
    await assert.rejects(
      buildKubeadmImages(['registry.k8s.io/etcd:3.5.0-0']),
      /not 3\.5\.0-0; pin it in hack\/go\/kubeadm-etcd/,
    );
    await assert.rejects(
      buildKubeadmImages(['registry.k8s.io/coredns/coredns:v1.0.0']),
      /not v1\.0\.0; pin it in hack\/go\/kubeadm-coredns/,
    );
  });

  it('refuses an image it has no recipe for, and a reference without a tag', async () => {
    await assert.rejects(
      buildKubeadmImages(['registry.k8s.io/kube-something:v1.37.2']),
      /no recipe for an image named kube-something/,
    );
    await assert.rejects(buildKubeadmImages(['registry.k8s.io/pause']), /has no tag/);
  });
});
