/**
 * The pod spec surface seen from inside containers (issue #4): environment (expansion,
 * downward fields, configMap/secret keys, envFrom prefixes, service links), /etc/hosts
 * and /etc/resolv.conf per dnsPolicy and hostAliases, hostNetwork, QoS classes and
 * cgroup limits, termination messages, and bad input that must fail cleanly.
 */
import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod } from 'kubernetes-types/core/v1.js';
import { GrpcCriClient } from '../../src/cri/index.ts';
import { startBerth, type BerthNode } from '../harness/berth-node.ts';
import { startCluster, type Cluster } from '../harness/cluster.ts';
import {
  applyJson,
  busyboxPod,
  eventually,
  isRunningAndReady,
  podEvents,
  waitForPod,
} from '../harness/kube-helpers.ts';

type Spec = NonNullable<Pod['spec']>;

describe('pod spec surface on berth (containerd 2.x)', () => {
  let cluster: Cluster;
  let berth: BerthNode;
  let node: string;

  before(async () => {
    cluster = await startCluster({ runtime: 'containerd2' });
    berth = await startBerth(cluster, {
      extraConfig: ['clusterDNS: ["10.96.0.10"]', 'clusterDomain: cluster.local'],
    });
    node = berth.nodeName;
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'env-cfg', namespace: 'default' },
      data: { COLOR: 'blue', '1st.key': 'x', SIZE: 'L' },
    });
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'env-sec', namespace: 'default' },
      data: { token: Buffer.from('s3cr3t').toString('base64') },
    });
    await applyJson(cluster, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'my-web', namespace: 'default' },
      spec: { ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], selector: { app: 'none' } },
    });
  });

  after(async () => {
    await berth.stop();
    await cluster.stop();
    assert.deepEqual(await cluster.leaks(), []);
  });

  const kubectl = (args: string[]): Promise<string> => cluster.kubectl(['-n', 'default', ...args]);
  const sh = (pod: string, script: string): Promise<string> =>
    kubectl(['exec', pod, '--', 'sh', '-c', script]);

  function pod(name: string, main: Partial<Container>, extra: Partial<Spec> = {}): Pod {
    const base = busyboxPod(cluster, name, node);
    const [c] = base.spec?.containers ?? [];
    return {
      ...base,
      spec: { ...base.spec, containers: [{ ...c, ...main } as Container], ...extra },
    };
  }

  async function running(p: Pod): Promise<Pod> {
    await applyJson(cluster, p);
    return waitForPod(cluster, 'default', p.metadata?.name ?? '', 'Running', isRunningAndReady);
  }

  test('env: expansion, downward fields, configMap/secret keys, envFrom prefix, service links', async () => {
    const p = await running(
      pod(
        'env',
        {
          // $$ escapes: the shell gets a literal $(NOPE) inside single quotes.
          command: ['sh', '-c', "echo '$(GREETING) from $(POD_NAME) $$(NOPE)'; sleep 3600"],
          env: [
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            { name: 'POD_NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
            { name: 'POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
            { name: 'TIER', valueFrom: { fieldRef: { fieldPath: "metadata.labels['tier']" } } },
            { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
            { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
            {
              name: 'MEM_MI',
              valueFrom: {
                resourceFieldRef: {
                  resource: 'limits.memory',
                  divisor: '1Mi',
                  containerName: 'main',
                },
              },
            },
            { name: 'GREETING', value: 'hello $(POD_NAME) in $(POD_NS)' },
            {
              name: 'COLOR_COPY',
              valueFrom: { configMapKeyRef: { name: 'env-cfg', key: 'COLOR' } },
            },
            { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'env-sec', key: 'token' } } },
            {
              name: 'MAYBE',
              valueFrom: { configMapKeyRef: { name: 'env-cfg', key: 'absent', optional: true } },
            },
          ],
          envFrom: [
            { prefix: 'CFG_', configMapRef: { name: 'env-cfg' } },
            { configMapRef: { name: 'env-cfg' } },
            { secretRef: { name: 'absent-secret', optional: true } },
          ],
          resources: { limits: { memory: '64Mi' } },
        },
        {},
      ),
    );
    // Not through sh: busybox's shell drops variables whose names are not identifiers.
    const env = await kubectl(['exec', 'env', '--', 'env']);
    const vars = new Map(
      env
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    assert.equal(vars.get('POD_NAME'), 'env');
    assert.equal(vars.get('POD_UID'), p.metadata?.uid);
    assert.equal(vars.get('NODE'), node);
    assert.equal(vars.get('POD_IP'), p.status?.podIP);
    assert.equal(vars.get('HOST_IP'), '127.0.0.1');
    assert.equal(vars.get('MEM_MI'), '64');
    assert.equal(vars.get('GREETING'), 'hello env in default');
    assert.equal(vars.get('COLOR_COPY'), 'blue');
    assert.equal(vars.get('TOKEN'), 's3cr3t');
    assert.equal(vars.has('MAYBE'), false);
    assert.equal(vars.get('CFG_COLOR'), 'blue');
    assert.equal(vars.get('CFG_SIZE'), 'L');
    // v1.37 passes names that are not C identifiers through (relaxed validation is GA).
    assert.equal(vars.get('CFG_1st.key'), 'x');
    assert.equal(vars.get('1st.key'), 'x');
    assert.equal(vars.get('COLOR'), 'blue');
    assert.equal(vars.get('TIER'), '');
    // Service links: the pod's namespace and the kubernetes service.
    assert.match(vars.get('MY_WEB_SERVICE_HOST') ?? '', /^10\./);
    assert.equal(vars.get('MY_WEB_SERVICE_PORT'), '8080');
    assert.equal(vars.get('MY_WEB_SERVICE_PORT_HTTP'), '8080');
    assert.match(vars.get('MY_WEB_PORT') ?? '', /^tcp:\/\/10\.[\d.]+:8080$/);
    assert.ok(vars.has('KUBERNETES_SERVICE_HOST'));
    const logs = await kubectl(['logs', 'env']);
    assert.equal(logs.trim(), 'hello env in default from env $(NOPE)');
  });

  test('a missing configMap key fails the container with CreateContainerConfigError', async () => {
    await applyJson(
      cluster,
      pod('env-missing', {
        env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'env-cfg', key: 'nope' } } }],
      }),
    );
    const p = await waitForPod(
      cluster,
      'default',
      'env-missing',
      'config error',
      (x) =>
        x.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
    );
    assert.match(
      p.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '',
      /couldn't find key nope in ConfigMap default\/env-cfg/,
    );
  });

  test('enableServiceLinks false keeps only the kubernetes service variables', async () => {
    await running(pod('no-links', {}, { enableServiceLinks: false }));
    const env = await sh('no-links', 'env');
    assert.doesNotMatch(env, /MY_WEB_/);
    assert.match(env, /KUBERNETES_SERVICE_HOST=/);
  });

  test('/etc/hosts is kubelet-managed with hostAliases; resolv.conf per dnsPolicy', async () => {
    const p = await running(
      pod(
        'dns',
        {},
        {
          hostname: 'web-0',
          subdomain: 'web',
          hostAliases: [{ ip: '10.1.2.3', hostnames: ['foo.local', 'bar.local'] }],
        },
      ),
    );
    const hosts = await sh('dns', 'cat /etc/hosts');
    assert.match(hosts, /^# Kubernetes-managed hosts file\./);
    assert.match(
      hosts,
      new RegExp(
        `${p.status?.podIP ?? 'x'}\\tweb-0\\.web\\.default\\.svc\\.cluster\\.local\\tweb-0`,
      ),
    );
    assert.match(hosts, /# Entries added by HostAliases\.\n10\.1\.2\.3\tfoo\.local\tbar\.local/);
    assert.equal((await sh('dns', 'hostname')).trim(), 'web-0');
    const resolv = await sh('dns', 'cat /etc/resolv.conf');
    assert.match(resolv, /nameserver 10\.96\.0\.10/);
    assert.match(resolv, /search default\.svc\.cluster\.local svc\.cluster\.local cluster\.local/);
    assert.match(resolv, /options ndots:5/);

    await running(
      pod(
        'dns-none',
        {},
        {
          dnsPolicy: 'None',
          dnsConfig: {
            nameservers: ['10.9.9.9'],
            searches: ['example.test'],
            options: [{ name: 'ndots', value: '2' }],
          },
        },
      ),
    );
    const none = await sh('dns-none', 'cat /etc/resolv.conf');
    assert.match(none, /nameserver 10\.9\.9\.9/);
    assert.doesNotMatch(none, /10\.96\.0\.10/);
    assert.match(none, /search example\.test/);
    assert.match(none, /ndots:2/);
  });

  test('setHostnameAsFQDN: the kernel hostname is the FQDN; one too long fails the sandbox', async () => {
    await running(
      pod('fqdn', {}, { hostname: 'web-1', subdomain: 'web', setHostnameAsFQDN: true }),
    );
    assert.equal((await sh('fqdn', 'hostname')).trim(), 'web-1.web.default.svc.cluster.local');
    const long = 'a'.repeat(40);
    const fqdn = `${long}.web.default.svc.cluster.local`;
    await applyJson(cluster, pod(long, {}, { subdomain: 'web', setHostnameAsFQDN: true }));
    const events = await eventually(
      'FailedCreatePodSandBox for the long FQDN',
      async () => {
        const list = await podEvents(cluster, 'default', long);
        return list.some((e) => e.reason === 'FailedCreatePodSandBox') ? list : undefined;
      },
      60_000,
    );
    assert.ok(
      events.some(
        (e) =>
          e.message ===
          `Failed to create pod sandbox: failed to construct FQDN from pod hostname and cluster domain, FQDN ${fqdn} is too long (64 characters is the max, ${fqdn.length} characters requested)`,
      ),
      JSON.stringify(events),
    );
    await kubectl(['delete', 'pod', long, '--wait=true', '--timeout=60s']);
  });

  test('spec.hostnameOverride is the hostname, its FQDN and its /etc/hosts name', async () => {
    // Upstream's "Override hostname of Pod" specs: `hostname` and `hostname -f` both print
    // the override, whatever spec.hostname and spec.subdomain say.
    const cases: { name: string; spec: Partial<Spec> & { hostnameOverride: string } }[] = [
      { name: 'ho-subdomain-name', spec: { hostnameOverride: 'override.example.host' } },
      {
        name: 'ho-with-hostname',
        spec: { hostname: 'custom-host', hostnameOverride: 'override-host' },
      },
      { name: 'ho-only', spec: { hostnameOverride: 'override-host' } },
      { name: 'ho-with-subdomain', spec: { subdomain: 't', hostnameOverride: 'override-host' } },
    ];
    const script = "echo $(hostname)';'$(hostname -f)';'; cat /etc/hosts";
    for (const c of cases) {
      await applyJson(
        cluster,
        pod(c.name, { command: ['sh', '-c', script] }, { restartPolicy: 'Never', ...c.spec }),
      );
    }
    for (const c of cases) {
      const done = await waitForPod(
        cluster,
        'default',
        c.name,
        'Succeeded',
        (x) => x.status?.phase === 'Succeeded' || x.status?.phase === 'Failed',
      );
      assert.equal(done.status?.phase, 'Succeeded', c.name);
      const [first, ...hosts] = (await kubectl(['logs', c.name])).split('\n');
      const o = c.spec.hostnameOverride;
      assert.equal(first, `${o};${o};`, c.name);
      assert.ok(
        hosts.includes(`${done.status?.podIP ?? 'x'}\t${o}`),
        `${c.name}: ${hosts.join('\n')}`,
      );
    }
  });

  test('a hostNetwork pod sees the host interfaces', async () => {
    await running(pod('hostnet', {}, { hostNetwork: true }));
    const links = await sh('hostnet', 'cat /proc/net/dev');
    const hostIfaces = Object.keys(networkInterfaces());
    for (const name of hostIfaces) assert.match(links, new RegExp(`\\b${name}:`));
    const hosts = await sh('hostnet', 'cat /etc/hosts');
    assert.match(hosts, /host network/);
  });

  test('QoS class for all three; the pod cgroup and the container carry the limits', async () => {
    const g = await running(
      pod('qos-g', { resources: { limits: { cpu: '250m', memory: '48Mi' } } }),
    );
    const b = await running(pod('qos-b', { resources: { requests: { cpu: '100m' } } }));
    const e = await running(pod('qos-e', {}));
    assert.equal(g.status?.qosClass, 'Guaranteed');
    assert.equal(b.status?.qosClass, 'Burstable');
    assert.equal(e.status?.qosClass, 'BestEffort');
    const qosClass = await kubectl(['get', 'pod', 'qos-b', '-o', 'jsonpath={.status.qosClass}']);
    assert.equal(qosClass, 'Burstable');
    // Inside the container: its own cgroup limits (cgroup v1 on this machine).
    assert.equal(
      (await sh('qos-g', 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes')).trim(),
      String(48 * 1024 * 1024),
    );
    assert.equal((await sh('qos-g', 'cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us')).trim(), '25000');
    // Every hugepage size of the host is limited (to 0: the container asked for none), as
    // upstream. This host has no hugetlb controller, so containerd leaves the limits out
    // of the OCI spec; the CRI config it keeps (verbose status) shows what berth sent.
    const id = g.status?.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, '') ?? '';
    const cri = new GrpcCriClient(cluster.runtime.socket);
    let info: string;
    try {
      info =
        (await cri.runtime.containerStatus({ containerId: id, verbose: true })).info['info'] ??
        '{}';
    } finally {
      cri.close();
    }
    const sent = JSON.parse(info) as {
      config?: {
        linux?: { resources?: { hugepage_limits?: { page_size: string; limit?: number }[] } };
      };
    };
    const sizes = (await readdir('/sys/kernel/mm/hugepages')).map((d) => {
      const kib = Number(/^hugepages-(\d+)kB$/.exec(d)?.[1]);
      return kib >= 1024 * 1024 ? `${kib / 1024 / 1024}GB` : `${kib / 1024}MB`;
    });
    assert.deepEqual(
      (sent.config?.linux?.resources?.hugepage_limits ?? [])
        .map((l) => ({ pageSize: l.page_size, limit: l.limit ?? 0 }))
        .sort((x, y) => x.pageSize.localeCompare(y.pageSize)),
      sizes
        .map((pageSize) => ({ pageSize, limit: 0 }))
        .sort((x, y) => x.pageSize.localeCompare(y.pageSize)),
    );
    // On the host: the pod cgroups berth made under the QoS tiers.
    const root = cluster.state.cgroupRoot;
    const read = (c: string, path: string) =>
      readFile(`/sys/fs/cgroup/${c}${root}/${path}`, 'utf8');
    assert.equal(
      (await read('memory', `kubepods/pod${g.metadata?.uid ?? ''}/memory.limit_in_bytes`)).trim(),
      String(48 * 1024 * 1024),
    );
    assert.equal(
      (await read('cpu', `kubepods/burstable/pod${b.metadata?.uid ?? ''}/cpu.shares`)).trim(),
      '102',
    );
    assert.equal(
      (await read('cpu', `kubepods/besteffort/pod${e.metadata?.uid ?? ''}/cpu.shares`)).trim(),
      '2',
    );
  });

  test('termination message from the file, and from the logs with FallbackToLogsOnError', async () => {
    await applyJson(
      cluster,
      pod(
        'term-file',
        { command: ['sh', '-c', 'echo -n "all done" > /dev/termination-log; exit 3'] },
        { restartPolicy: 'Never' },
      ),
    );
    await applyJson(
      cluster,
      pod(
        'term-logs',
        {
          command: ['sh', '-c', 'echo first; echo last words; exit 1'],
          terminationMessagePolicy: 'FallbackToLogsOnError',
        },
        { restartPolicy: 'Never' },
      ),
    );
    const f = await waitForPod(
      cluster,
      'default',
      'term-file',
      'Failed',
      (x) => x.status?.phase === 'Failed',
    );
    assert.equal(f.status?.containerStatuses?.[0]?.state?.terminated?.message, 'all done');
    const l = await waitForPod(
      cluster,
      'default',
      'term-logs',
      'Failed',
      (x) => x.status?.phase === 'Failed',
    );
    assert.equal(
      l.status?.containerStatuses?.[0]?.state?.terminated?.message,
      'first\nlast words\n',
    );
  });

  test('bad input: a $(VAR) loop and a very long value are safe; a too long one fails clearly', async () => {
    const long = 'v'.repeat(64 * 1024);
    await running(
      pod('env-bad', {
        env: [
          { name: 'A', value: '$(B)' },
          { name: 'B', value: '$(A)' },
          { name: 'LONG', value: long },
        ],
      }),
    );
    const out = await sh('env-bad', 'echo "$A|$B|${#LONG}"');
    assert.equal(out.trim(), `$(B)|$(B)|${long.length}`);
    // Beyond the kernel's 128 KiB per variable the container cannot start: a clear state.
    // create, not apply: apply's last-applied annotation cannot hold 256 KiB.
    await cluster.kubectl(['create', '-f', '-'], {
      input: JSON.stringify(
        pod('env-huge', { env: [{ name: 'HUGE', value: 'h'.repeat(256 * 1024) }] }),
      ),
    });
    // The kernel refuses the exec: the container fails (and is retried); its status says why.
    const huge = await waitForPod(cluster, 'default', 'env-huge', 'failing to start', (p) => {
      const c = p.status?.containerStatuses?.[0];
      const why =
        c?.state?.waiting?.message ??
        c?.state?.terminated?.message ??
        c?.lastState?.terminated?.message ??
        '';
      return why !== '';
    });
    assert.notEqual(huge.status?.phase, 'Succeeded');
    await eventually('berth still healthy', async () =>
      (await kubectl([
        'get',
        'node',
        node,
        '-o',
        'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
      ])) === 'True'
        ? true
        : undefined,
    );
  });

  // Last: it restarts berth without clusterDNS, which the tests above rely on.
  test('without clusterDNS a ClusterFirst pod gets the node resolv.conf and a MissingClusterDNS warning', async () => {
    const config = await readFile(berth.configFile, 'utf8');
    await writeFile(
      berth.configFile,
      config
        .split('\n')
        .filter((l) => !l.startsWith('clusterDNS:'))
        .join('\n'),
    );
    berth = await berth.restart();
    const first = await running(pod('dns-missing', {}));
    const hostNet = await running(
      pod('dns-missing-hostnet', {}, { hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' }),
    );
    await running(pod('dns-default', {}, { dnsPolicy: 'Default' }));
    // Upstream falls back to the Default policy: the node's own resolver configuration.
    const hostServers = (await readFile('/etc/resolv.conf', 'utf8')).match(/^nameserver\s+\S+/gm);
    const resolv = await sh('dns-missing', 'cat /etc/resolv.conf');
    for (const line of hostServers ?? []) assert.match(resolv, new RegExp(line));
    assert.doesNotMatch(resolv, /ndots:5|svc\.cluster\.local/);
    const nodeMessage =
      'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.';
    for (const p of [first, hostNet]) {
      const name = p.metadata?.name ?? '';
      const events = await eventually(`MissingClusterDNS on ${name}`, async () => {
        const list = await podEvents(cluster, 'default', name);
        return list.some((e) => e.reason === 'MissingClusterDNS') ? list : undefined;
      });
      const warning = events.find((e) => e.reason === 'MissingClusterDNS');
      assert.equal(warning?.type, 'Warning');
      assert.equal(
        warning?.message,
        `pod: "${name}_default(${p.metadata?.uid ?? ''})". ${nodeMessage}`,
      );
    }
    // The node is told too, with upstream's message; a Default pod is not warned about.
    const onNode = await podEvents(cluster, 'default', node);
    assert.ok(
      onNode.some(
        (e) =>
          e.reason === 'MissingClusterDNS' && e.message === nodeMessage && e.type === 'Warning',
      ),
      JSON.stringify(onNode),
    );
    const quiet = await podEvents(cluster, 'default', 'dns-default');
    assert.ok(!quiet.some((e) => e.reason === 'MissingClusterDNS'), JSON.stringify(quiet));
  });
});
