/**
 * Volumes on a berth node (issue #5 acceptance), containerd 2.x with kube-proxy: the
 * default service-account volume used against the real API server, emptyDir (disk and
 * memory), every hostPath type, configMap/secret/downwardAPI content, modes and
 * updates, subPath and subPathExpr, path escapes refused, and clean-up.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  listPods,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

type Spec = NonNullable<Pod['spec']>;

describe('volumes on berth (containerd 2.x, kube-proxy)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;
  let canaryDir: string;
  const canaryText = 'host canary: must never be read, changed or deleted\n';

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2', kubeProxy: true });
    berth = await startBerth(cluster);
    node = berth.nodeName;
    canaryDir = await mkdtemp(join(tmpdir(), 'berth-canary-'));
    await writeFile(join(canaryDir, 'canary.txt'), canaryText);
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
    // The canary survived everything the pods tried.
    assert.equal(await readFile(join(canaryDir, 'canary.txt'), 'utf8'), canaryText);
    assert.deepEqual(await readdir(canaryDir), ['canary.txt']);
    await rm(canaryDir, { recursive: true, force: true });
  });

  const kubectl = (args: string[]): Promise<string> => cluster.kubectl(['-n', 'default', ...args]);
  const sh = (pod: string, script: string, container?: string): Promise<string> =>
    kubectl([
      'exec',
      pod,
      ...(container === undefined ? [] : ['-c', container]),
      '--',
      'sh',
      '-c',
      script,
    ]);

  /** A busybox pod with volumes and per-container mounts. */
  function podWith(
    name: string,
    volumes: Spec['volumes'],
    containers: Partial<Container>[],
    extra: Partial<Spec> = {},
  ): Pod {
    const base = busyboxPod(cluster, name, node);
    const image = cluster.images.busyboxLocal;
    return {
      ...base,
      spec: {
        ...base.spec,
        volumes,
        containers: containers.map((c, i) => ({
          name: `c${i}`,
          image,
          imagePullPolicy: 'IfNotPresent',
          command: ['sleep', '3600'],
          ...c,
        })),
        ...extra,
      } as Spec,
    };
  }

  async function running(pod: Pod): Promise<Pod> {
    await applyJson(cluster, pod);
    return waitForPod(cluster, 'default', pod.metadata?.name ?? '', 'Running', isRunningAndReady);
  }

  async function failsWith(pod: Pod, reason: RegExp, message: RegExp): Promise<void> {
    const name = pod.metadata?.name ?? '';
    await applyJson(cluster, pod);
    await eventually(`an event ${reason.source} for ${name}`, async () => {
      const events = await podEvents(cluster, 'default', name);
      return events.find((e) => reason.test(e.reason) && message.test(e.message));
    });
    const got = await waitForPod(cluster, 'default', name, 'not running', () => true);
    assert.ok(
      (got.status?.containerStatuses ?? []).every((c) => c.state?.running === undefined),
      `no container of ${name} runs`,
    );
  }

  test('a default Deployment uses its projected token against the real API server', async () => {
    await applyJson(cluster, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'default-view', namespace: 'default' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: 'default' }],
    });
    await applyJson(cluster, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'api-user', namespace: 'default' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'api-user' } },
        template: {
          metadata: { labels: { app: 'api-user' } },
          spec: {
            nodeName: node,
            terminationGracePeriodSeconds: 2,
            // The API call must succeed for the pod to start at all.
            initContainers: [
              {
                name: 'api',
                image: cluster.images.grpcHealthLocal,
                imagePullPolicy: 'IfNotPresent',
                command: ['/kube-get', '-path', '/api/v1/namespaces/default/pods'],
              },
            ],
            containers: [
              {
                name: 'main',
                image: cluster.images.busyboxLocal,
                imagePullPolicy: 'IfNotPresent',
                command: ['sleep', '3600'],
              },
            ],
          },
        },
      },
    });
    const [pod] = await eventually(
      'the api-user pod to run',
      async () => {
        const pods = await listPods(cluster, 'app=api-user');
        return pods.length === 1 && pods[0] !== undefined && isRunningAndReady(pods[0])
          ? pods
          : undefined;
      },
      120_000,
      1000,
    );
    const name = pod?.metadata?.name ?? '';
    // The API server injected the kube-api-access volume; berth filled it.
    assert.ok(pod?.spec?.volumes?.some((v) => v.name.startsWith('kube-api-access-')));
    const logs = await kubectl(['logs', name, '-c', 'api']);
    assert.match(logs, /^200 OK\n/);
    assert.match(logs, /"kind":"PodList"/);
    const sa = '/var/run/secrets/kubernetes.io/serviceaccount';
    assert.equal(await sh(name, `cat ${sa}/namespace`, 'main'), 'default');
    assert.match(await sh(name, `cat ${sa}/ca.crt`, 'main'), /BEGIN CERTIFICATE/);
    assert.match(await sh(name, `ls -A ${sa}`, 'main'), /\.\.data/);
  });

  test('emptyDir is shared between containers; medium Memory is a tmpfs with the size limit', async () => {
    await running(
      podWith(
        'shared',
        [
          { name: 'scratch', emptyDir: {} },
          { name: 'ram', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
        ],
        [
          {
            command: ['sh', '-c', 'echo from-c0 > /data/hello && sleep 3600'],
            volumeMounts: [
              { name: 'scratch', mountPath: '/data' },
              { name: 'ram', mountPath: '/ram' },
            ],
          },
          { volumeMounts: [{ name: 'scratch', mountPath: '/shared' }] },
        ],
      ),
    );
    const seen = await eventually('c1 to see c0 file', async () => {
      const out = await sh('shared', 'cat /shared/hello', 'c1').catch(() => '');
      return out.includes('from-c0') ? out : undefined;
    });
    assert.match(seen, /from-c0/);
    const mount = await sh('shared', 'grep " /ram " /proc/mounts', 'c0');
    assert.match(mount, /^tmpfs \/ram tmpfs /);
    assert.match(mount, /size=16384k/);
  });

  test('hostPath: every type succeeds where it should and fails where it should', async () => {
    const base = join(canaryDir, 'hostpath');
    await mkdir(join(base, 'dir'), { recursive: true });
    await writeFile(join(base, 'file'), 'host file\n');
    const cases: { type: string; path: string; ok: boolean }[] = [
      { type: 'DirectoryOrCreate', path: join(base, 'made-dir'), ok: true },
      { type: 'Directory', path: join(base, 'dir'), ok: true },
      { type: 'Directory', path: join(base, 'file'), ok: false },
      { type: 'FileOrCreate', path: join(base, 'made-file'), ok: true },
      { type: 'File', path: join(base, 'file'), ok: true },
      { type: 'File', path: join(base, 'dir'), ok: false },
      { type: 'Socket', path: join(base, 'file'), ok: false },
      { type: 'CharDevice', path: '/dev/null', ok: true },
      { type: 'CharDevice', path: join(base, 'file'), ok: false },
      { type: 'BlockDevice', path: '/dev/null', ok: false },
      { type: '', path: join(base, 'dir'), ok: true },
    ];
    await Promise.all(
      cases.map(async (c, i) => {
        const pod = podWith(
          `hostpath-${i}`,
          [{ name: 'h', hostPath: { path: c.path, ...(c.type !== '' && { type: c.type }) } }],
          [{ volumeMounts: [{ name: 'h', mountPath: '/h' }] }],
        );
        if (c.ok) await running(pod);
        else await failsWith(pod, /^FailedMount$/, /hostPath type check failed/);
      }),
    );
    assert.ok((await stat(join(base, 'made-dir'))).isDirectory());
    assert.ok((await stat(join(base, 'made-file'))).isFile());
    await rm(base, { recursive: true, force: true });
    await kubectl(['delete', 'pod', ...cases.map((_, i) => `hostpath-${i}`), '--wait=false']);
  });

  test('configMap and secret: items, modes, optional, tmpfs; updates reach the volume but not a subPath', async () => {
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cfg', namespace: 'default' },
      data: { 'app.conf': 'v1\n', other: 'o\n' },
    });
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'sec', namespace: 'default' },
      data: { password: Buffer.from('hunter2').toString('base64') },
    });
    await running(
      podWith(
        'content',
        [
          { name: 'cfg', configMap: { name: 'cfg', defaultMode: 0o640 } },
          {
            name: 'items',
            configMap: {
              name: 'cfg',
              items: [{ key: 'app.conf', path: 'sub/renamed', mode: 0o600 }],
            },
          },
          { name: 'sec', secret: { secretName: 'sec' } },
          { name: 'maybe', configMap: { name: 'does-not-exist', optional: true } },
          {
            name: 'meta',
            downwardAPI: {
              items: [
                { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
                { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
              ],
            },
          },
        ],
        [
          {
            volumeMounts: [
              { name: 'cfg', mountPath: '/cfg' },
              { name: 'items', mountPath: '/items' },
              { name: 'sec', mountPath: '/sec' },
              { name: 'maybe', mountPath: '/maybe' },
              { name: 'meta', mountPath: '/meta' },
              { name: 'cfg', mountPath: '/pinned.conf', subPath: 'app.conf' },
            ],
          },
        ],
      ),
    );
    assert.equal(await sh('content', 'cat /cfg/app.conf'), 'v1\n');
    assert.equal((await sh('content', 'stat -L -c %a /cfg/app.conf')).trim(), '640');
    assert.equal(await sh('content', 'cat /items/sub/renamed'), 'v1\n');
    assert.equal((await sh('content', 'stat -L -c %a /items/sub/renamed')).trim(), '600');
    assert.equal(await sh('content', 'ls /items'), 'sub\n');
    assert.equal(await sh('content', 'cat /sec/password'), 'hunter2');
    assert.match(await sh('content', 'grep " /sec " /proc/mounts'), /^tmpfs \/sec tmpfs /);
    assert.equal(await sh('content', 'ls -A /maybe | grep -v "^\\.\\." | wc -l'), '0\n');
    assert.equal(await sh('content', 'cat /meta/name'), 'content\n'.trim());
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cfg', namespace: 'default' },
      data: { 'app.conf': 'v2\n', other: 'o\n' },
    });
    await eventually(
      'the configMap update to reach /cfg',
      async () => ((await sh('content', 'cat /cfg/app.conf')) === 'v2\n' ? true : undefined),
      90_000,
      1000,
    );
    assert.equal(await sh('content', 'cat /pinned.conf'), 'v1\n', 'a subPath mount never changes');
  });

  test('fsGroup: volumes are group-owned, writable by the group, and the container is in it', async () => {
    await running(
      podWith(
        'fsgroup',
        [
          { name: 'scratch', emptyDir: {} },
          { name: 'cfg', configMap: { name: 'cfg' } },
        ],
        [
          {
            volumeMounts: [
              { name: 'scratch', mountPath: '/scratch' },
              { name: 'cfg', mountPath: '/cfg' },
            ],
          },
        ],
        { securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 } },
      ),
    );
    assert.match(await sh('fsgroup', 'id -G'), /\b2000\b/);
    assert.equal((await sh('fsgroup', 'stat -c %g /scratch')).trim(), '2000');
    assert.equal((await sh('fsgroup', 'stat -L -c %g /cfg/app.conf')).trim(), '2000');
    // A new file inherits the group (setgid directory); user 1000 can write there.
    assert.equal((await sh('fsgroup', 'touch /scratch/f && stat -c %g /scratch/f')).trim(), '2000');
  });

  test("fsGroup: a nonexistent subPath gets the volume's mode and group (setgid, sticky on tmpfs)", async () => {
    // Upstream's "EmptyDir volumes when FSGroup is specified: nonexistent volume subPath
    // should have the correct mode and owner using FSGroup" (a non-root user, fsGroup 123,
    // medium Memory): perms rwxrwxrwx, owner 0, group 123, mode dgtrwxrwxrwx, tmpfs.
    await running(
      podWith(
        'subpath-fsgroup',
        [
          { name: 'ram', emptyDir: { medium: 'Memory' } },
          { name: 'disk', emptyDir: {} },
        ],
        [
          {
            volumeMounts: [
              { name: 'ram', mountPath: '/test-volume', subPath: 'test-sub' },
              { name: 'disk', mountPath: '/disk-volume', subPath: 'a/b' },
            ],
          },
        ],
        { securityContext: { runAsUser: 1001, fsGroup: 123 } },
      ),
    );
    assert.equal(
      (await sh('subpath-fsgroup', 'stat -c "%a %A %u %g" /test-volume')).trim(),
      '3777 drwxrwsrwt 0 123',
    );
    assert.match(
      await sh('subpath-fsgroup', 'grep " /test-volume " /proc/mounts'),
      /^tmpfs \/test-volume tmpfs /,
    );
    // On disk the volume is 02777, and so is each directory berth made for the subPath.
    assert.equal(
      (await sh('subpath-fsgroup', 'stat -c "%a %u %g" /disk-volume')).trim(),
      '2777 0 123',
    );
    // The non-root user writes there, and what it writes inherits the group.
    assert.equal(
      (
        await sh('subpath-fsgroup', 'touch /test-volume/f && stat -c "%u %g" /test-volume/f')
      ).trim(),
      '1001 123',
    );
  });

  test('a missing configMap holds the pod in ContainerCreating with FailedMount', async () => {
    await failsWith(
      podWith(
        'no-cfg',
        [{ name: 'c', configMap: { name: 'nope' } }],
        [{ volumeMounts: [{ name: 'c', mountPath: '/c' }] }],
      ),
      /^FailedMount$/,
      /configmap "nope" not found/,
    );
    const pod = await waitForPod(cluster, 'default', 'no-cfg', 'waiting', () => true);
    assert.equal(pod.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
  });

  test('subPathExpr expands a downward env var', async () => {
    await running(
      podWith(
        'expr',
        [{ name: 'd', emptyDir: {} }],
        [
          {
            env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
            command: ['sh', '-c', 'echo mine > /out/f && sleep 3600'],
            volumeMounts: [{ name: 'd', mountPath: '/out', subPathExpr: '$(POD_NAME)' }],
          },
          { volumeMounts: [{ name: 'd', mountPath: '/all' }] },
        ],
      ),
    );
    const out = await eventually('c1 sees expr/f', async () => {
      const s = await sh('expr', 'cat /all/expr/f', 'c1').catch(() => '');
      return s === 'mine\n' ? s : undefined;
    });
    assert.equal(out, 'mine\n');
  });

  test('escapes are refused: .. and absolute subPathExpr, a planted symlink used as subPath', async () => {
    const escapes: [string, Partial<Container>][] = [
      [
        'esc-dotdot',
        {
          env: [{ name: 'X', value: '../../../../../../etc' }],
          volumeMounts: [{ name: 'd', mountPath: '/x', subPathExpr: '$(X)' }],
        },
      ],
      [
        'esc-abs',
        {
          env: [{ name: 'X', value: canaryDir }],
          volumeMounts: [{ name: 'd', mountPath: '/x', subPathExpr: '$(X)' }],
        },
      ],
    ];
    for (const [name, c] of escapes) {
      await failsWith(
        podWith(name, [{ name: 'd', emptyDir: {} }], [c]),
        /^Failed$/,
        /subPath|subpath|path/,
      );
    }
    // An init container plants a symlink to the host canary; the app container uses it.
    await failsWith(
      podWith(
        'esc-symlink',
        [{ name: 'd', emptyDir: {} }],
        [
          {
            command: ['sh', '-c', 'cat /x/canary.txt; echo pwned > /x/canary.txt; sleep 3600'],
            volumeMounts: [{ name: 'd', mountPath: '/x', subPath: 'link' }],
          },
        ],
        {
          initContainers: [
            {
              name: 'plant',
              image: cluster.images.busyboxLocal,
              imagePullPolicy: 'IfNotPresent',
              command: ['ln', '-s', canaryDir, '/d/link'],
              volumeMounts: [{ name: 'd', mountPath: '/d' }],
            },
          ],
        },
      ),
      /^Failed$/,
      /subPath|subpath|symlink|path/,
    );
  });

  test('a deleted pod leaves nothing mounted or on disk; leftovers are removed after a restart', async () => {
    const mk = (name: string): Pod =>
      podWith(
        name,
        [
          { name: 'ram', emptyDir: { medium: 'Memory' } },
          { name: 'sec', secret: { secretName: 'sec' } },
        ],
        [
          {
            volumeMounts: [
              { name: 'ram', mountPath: '/ram' },
              { name: 'sec', mountPath: '/sec' },
            ],
          },
        ],
      );
    const gone = await running(mk('gone'));
    const uid = gone.metadata?.uid ?? '';
    const podDir = join(berth.dir, 'pods', uid);
    assert.ok((await stat(podDir)).isDirectory());
    await kubectl(['delete', 'pod', 'gone', '--wait=true', '--timeout=60s']);
    await eventually('the pod directory to go', async () =>
      (await stat(podDir).catch(() => undefined)) === undefined ? true : undefined,
    );
    assert.doesNotMatch(await readFile('/proc/self/mountinfo', 'utf8'), new RegExp(uid));

    const orphan = await running(mk('orphan'));
    const orphanUid = orphan.metadata?.uid ?? '';
    await berth.stop();
    await kubectl(['delete', 'pod', 'orphan', '--grace-period=0', '--force', '--wait=true']);
    berth = await berth.restart();
    await eventually(
      'the orphaned pod directory to be removed after the restart',
      async () =>
        (await stat(join(berth.dir, 'pods', orphanUid)).catch(() => undefined)) === undefined
          ? true
          : undefined,
      90_000,
      1000,
    );
    assert.doesNotMatch(await readFile('/proc/self/mountinfo', 'utf8'), new RegExp(orphanUid));
  });
});
