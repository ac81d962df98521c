import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, HelpRequestedError, VersionRequestedError } from './errors.ts';
import { loadConfig, type LoadConfigOptions } from './load.ts';

const HEADER = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';

/** Options with an in-memory file system and a fixed hostname. */
function fakes(files: Readonly<Record<string, string>> = {}): LoadConfigOptions {
  return {
    cwd: '/work',
    hostname: () => 'Node-1.Example',
    readFile: (path) => {
      const text = files[path];
      return text === undefined
        ? Promise.reject(new Error(`ENOENT: no such file or directory, open '${path}'`))
        : Promise.resolve(text);
    },
  };
}

async function rejects(
  argv: readonly string[],
  files: Readonly<Record<string, string>>,
  message: RegExp,
): Promise<ConfigError> {
  let caught: unknown;
  try {
    await loadConfig(argv, fakes(files));
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof ConfigError, `expected a ConfigError, got ${String(caught)}`);
  assert.match(caught.message, message);
  return caught;
}

describe('loadConfig', () => {
  test('runs on defaults without flags or file', async () => {
    const c = await loadConfig([], fakes());
    assert.equal(c.configFile, null);
    assert.equal(c.kubeconfig, null);
    assert.equal(c.bootstrapKubeconfig, null);
    assert.equal(c.rootDir, '/var/lib/kubelet');
    assert.equal(c.certDir, '/var/lib/kubelet/pki');
    assert.equal(c.containerLogSymlinkDir, '/var/log/containers');
    assert.equal(c.hostnameOverride, null);
    assert.equal(c.nodeName, 'node-1.example');
    assert.deepEqual(c.nodeIPs, []);
    assert.deepEqual(c.nodeLabels, {});
    assert.deepEqual(c.registerWithTaints, []);
    assert.equal(c.verbosity, 0);
    assert.equal(c.loggingFormat, 'text');
    assert.equal(c.kubelet.maxPods, 110);
    assert.equal(c.kubelet.syncFrequencyMs, 60_000);
    assert.equal(c.kubelet.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
    // berth keeps the secure v1beta1 defaults even without --config.
    assert.equal(c.kubelet.authentication.anonymous.enabled, false);
    assert.equal(c.kubelet.authorization.mode, 'Webhook');
    assert.equal(c.kubelet.readOnlyPort, 0);
    assert.deepEqual(c.warnings, []);
  });

  test('reads the file given by --config, relative to the working directory', async () => {
    const c = await loadConfig(
      ['--config', 'etc/config.yaml', '--kubeconfig=/etc/kubernetes/kubelet.conf'],
      fakes({
        '/work/etc/config.yaml': `${HEADER}maxPods: 30\nsyncFrequency: 30s\nstaticPodPath: manifests\nlogging:\n  verbosity: 3\n  format: json\nregisterWithTaints:\n  - key: a\n    effect: NoSchedule\n`,
      }),
    );
    assert.equal(c.configFile, '/work/etc/config.yaml');
    assert.equal(c.kubeconfig, '/etc/kubernetes/kubelet.conf');
    assert.equal(c.kubelet.maxPods, 30);
    assert.equal(c.kubelet.syncFrequencyMs, 30_000);
    assert.equal(c.kubelet.staticPodPath, '/work/etc/manifests');
    assert.equal(c.verbosity, 3);
    assert.equal(c.loggingFormat, 'json');
    assert.deepEqual(c.registerWithTaints, [{ key: 'a', value: '', effect: 'NoSchedule' }]);
  });

  test('lets flags override the file', async () => {
    const files = {
      '/c.yaml': `${HEADER}maxPods: 30\nfailSwapOn: true\nsyncFrequency: 30s\nclusterDNS: [10.0.0.10]\nfeatureGates:\n  A: true\n  B: true\nlogging:\n  verbosity: 1\nstaticPodPath: /etc/manifests\n`,
    };
    const c = await loadConfig(
      [
        '--config=/c.yaml',
        '--max-pods=50',
        '--fail-swap-on=false',
        '--sync-frequency',
        '2m',
        '--cluster-dns=10.96.0.10,fd00::10',
        '--feature-gates=B=false,C=true',
        '-v=4',
        '--pod-manifest-path=/srv/manifests',
        '--logging-format=json',
        '--register-with-taints=k=v:NoExecute',
        '--streaming-connection-idle-timeout=5m',
        '--read-only-port=10255',
      ],
      fakes(files),
    );
    assert.equal(c.kubelet.streamingConnectionIdleTimeoutMs, 300_000);
    assert.equal(c.kubelet.readOnlyPort, 10255);
    assert.equal(c.kubelet.maxPods, 50);
    assert.equal(c.kubelet.failSwapOn, false);
    assert.equal(c.kubelet.syncFrequencyMs, 120_000);
    assert.deepEqual(c.kubelet.clusterDNS, ['10.96.0.10', 'fd00::10']);
    assert.deepEqual(c.kubelet.featureGates, { A: true, B: false, C: true });
    assert.equal(c.verbosity, 4);
    assert.equal(c.kubelet.logging.verbosity, 4);
    assert.equal(c.loggingFormat, 'json');
    assert.equal(c.kubelet.staticPodPath, '/srv/manifests');
    assert.deepEqual(c.registerWithTaints, [{ key: 'k', value: 'v', effect: 'NoExecute' }]);
    assert.ok(
      c.warnings.includes(
        'flag --pod-manifest-path is deprecated: set staticPodPath in the --config file instead',
      ),
    );
    assert.ok(!c.warnings.some((w) => w.includes('--v ')), 'the verbosity flag is not deprecated');
  });

  test('reads --manifest-url, repeated --manifest-url-header and --http-check-frequency', async () => {
    const c = await loadConfig(
      [
        '--manifest-url=http://127.0.0.1:8080/pods',
        '--manifest-url-header=a:hello,b:again,c:world',
        '--manifest-url-header=b:beautiful,d:x:y',
        '--http-check-frequency=5s',
      ],
      fakes(),
    );
    assert.equal(c.kubelet.staticPodURL, 'http://127.0.0.1:8080/pods');
    assert.deepEqual(c.kubelet.staticPodURLHeader, {
      a: ['hello'],
      b: ['again', 'beautiful'],
      c: ['world'],
      d: ['x:y'],
    });
    assert.equal(c.kubelet.httpCheckFrequencyMs, 5000);
    await assert.rejects(
      loadConfig(['--manifest-url-header=nocolon'], fakes()),
      /expect string:string/,
    );
  });

  test('reads booleans as --flag and --flag=false, and the verbosity as -v 4 or --v=4', async () => {
    assert.equal(
      (await loadConfig(['--serialize-image-pulls=false'], fakes())).kubelet.serializeImagePulls,
      false,
    );
    assert.equal(
      (await loadConfig(['--serialize-image-pulls'], fakes())).kubelet.serializeImagePulls,
      true,
    );
    assert.equal((await loadConfig(['-v', '4'], fakes())).verbosity, 4);
    assert.equal((await loadConfig(['--v=2'], fakes())).verbosity, 2);
  });

  test('a setting berth does not act on is refused unless it has the value berth behaves as', async () => {
    await assert.rejects(
      loadConfig(['--register-node=false'], fakes()),
      /field "registerNode" \(set by --register-node\): false is not supported by berth yet: berth always registers its Node/,
    );
    await assert.rejects(
      loadConfig(
        ['--config=/c.yaml'],
        fakes({ '/c.yaml': `${HEADER}cpuManagerPolicy: static\ntopologyManagerPolicy: none\n` }),
      ),
      /Cannot load \/c.yaml: field "cpuManagerPolicy": "static" is not supported by berth yet: .* \(line 3, column 19\)$/,
    );
    await assert.rejects(
      loadConfig(
        ['--config=/c.yaml'],
        fakes({ '/c.yaml': `${HEADER}kernelMemcgNotification: true\n` }),
      ),
      /field "kernelMemcgNotification": true is not supported by berth yet: berth detects memory pressure at evictionMonitoringPeriod only/,
    );
    // The values berth behaves as are accepted, set explicitly or not.
    const c = await loadConfig(
      ['--config=/c.yaml', '--register-node=true'],
      fakes({ '/c.yaml': `${HEADER}cpuManagerPolicy: none\ncpuCFSQuotaPeriod: 100ms\n` }),
    );
    assert.equal(c.kubelet.registerNode, true);
  });

  test('takes the per-node flags', async () => {
    const c = await loadConfig(
      [
        '--hostname-override=Worker-7',
        '--node-ip=10.1.2.3,fd00::3',
        '--node-labels=role=edge,node.kubernetes.io/pool=a',
        '--node-labels=zone=z1',
        '--root-dir=/srv/kubelet',
        '--container-log-symlink-dir=/srv/log/containers',
        '--bootstrap-kubeconfig=/etc/kubernetes/bootstrap.conf',
        '--container-runtime-endpoint=unix:///run/cri.sock',
        '--provider-id=aws:///i-1',
      ],
      fakes(),
    );
    assert.equal(c.hostnameOverride, 'Worker-7');
    assert.equal(c.nodeName, 'worker-7');
    assert.deepEqual(c.nodeIPs, ['10.1.2.3', 'fd00::3']);
    assert.deepEqual(c.nodeLabels, { role: 'edge', 'node.kubernetes.io/pool': 'a', zone: 'z1' });
    assert.equal(c.rootDir, '/srv/kubelet');
    assert.equal(c.certDir, '/srv/kubelet/pki');
    assert.equal(c.containerLogSymlinkDir, '/srv/log/containers');
    assert.equal(c.bootstrapKubeconfig, '/etc/kubernetes/bootstrap.conf');
    assert.equal(c.kubelet.containerRuntimeEndpoint, 'unix:///run/cri.sock');
    assert.equal(c.kubelet.providerID, 'aws:///i-1');
  });

  test('returns a frozen object', async () => {
    const c = await loadConfig([], fakes());
    assert.ok(Object.isFrozen(c));
    assert.ok(Object.isFrozen(c.kubelet.authentication.webhook));
    assert.ok(Object.isFrozen(c.kubelet.evictionHard));
    assert.throws(() => {
      (c.kubelet as { maxPods: number }).maxPods = 1;
    }, TypeError);
  });

  test('throws HelpRequestedError with the usage for --help and -h', async () => {
    for (const argv of [['--help'], ['-h'], ['--max-pods=3', '--help']]) {
      await assert.rejects(loadConfig(argv, fakes()), (err: unknown) => {
        assert.ok(err instanceof HelpRequestedError);
        // Not a configuration failure: a generic ConfigError handler must not catch it.
        assert.ok(!(err instanceof ConfigError));
        assert.equal(err.code, 'BERTH_CONFIG_HELP_REQUESTED');
        assert.match(err.usage, /--max-pods int/);
        assert.match(err.usage, /-v, --v int/);
        return true;
      });
    }
  });

  test('throws VersionRequestedError for --version and --version=raw, before reading the config', async () => {
    for (const [argv, raw] of [
      [['--version'], false],
      [['--config=/missing.yaml', '--version=true'], false],
      [['--version=raw'], true],
    ] as const) {
      await assert.rejects(loadConfig(argv, fakes()), (err: unknown) => {
        assert.ok(err instanceof VersionRequestedError);
        assert.ok(!(err instanceof ConfigError));
        assert.equal(err.raw, raw);
        return true;
      });
    }
    // --version=false is no request: berth starts as usual.
    const c = await loadConfig(['--version=false'], fakes());
    assert.equal(c.configFile, null);
    await rejects(['--version=maybe'], {}, /--version/);
  });

  test('rejects an unknown flag', async () => {
    const err = await rejects(['--foo'], {}, /^unknown flag: --foo$/);
    assert.equal(err.code, 'BERTH_CONFIG_INVALID');
  });

  test('rejects an invalid flag value naming the flag', async () => {
    await rejects(['--max-pods=abc'], {}, /^invalid argument "abc" for "--max-pods" flag/);
    await rejects(['--sync-frequency=10'], {}, /"--sync-frequency" flag: missing unit/);
    await rejects(
      ['--node-ip=10.0.0.1,10.0.0.2'],
      {},
      /"--node-ip" flag: two addresses must be one IPv4 and one IPv6/,
    );
    await rejects(
      ['--register-with-taints=a=b'],
      {},
      /"--register-with-taints" flag: invalid taint "a=b"/,
    );
    await rejects(['--register-with-taints=a=b:Sometimes'], {}, /invalid taint effect "Sometimes"/);
    await rejects(
      ['--node-labels=kubernetes.io/role=x'],
      {},
      /"--node-labels" flag: label "kubernetes.io\/role" is in the kubernetes.io/,
    );
    await rejects(
      ['--cluster-dns=dns.local'],
      {},
      /"--cluster-dns" flag: "dns.local" is not an IP address/,
    );
    await rejects(
      ['--logging-format=xml'],
      {},
      /"--logging-format" flag: expected one of text, json/,
    );
    await rejects(['--v=-1'], {}, /"--v" flag: expected an integer from 0/);
    await rejects(['--kubeconfig'], {}, /^flag needs an argument: --kubeconfig$/);
  });

  test('reports unknown fields and wrong types of the file with lines', async () => {
    const err = await rejects(
      ['--config=/c.yaml'],
      { '/c.yaml': `${HEADER}syncFrequncy: 1m\nmaxPods: abc\n` },
      /^Cannot load \/c.yaml: 2 problems:/,
    );
    assert.match(
      err.message,
      /unknown field "syncFrequncy"; did you mean "syncFrequency"\? \(line 3/,
    );
    assert.match(err.message, /field "maxPods": expected a number, got "abc" \(line 4/);
  });

  test('reports an unreadable file', async () => {
    const err = await rejects(
      ['--config=/missing.yaml'],
      {},
      /^Cannot load \/missing.yaml: ENOENT/,
    );
    assert.equal(err.code, 'BERTH_CONFIG_UNREADABLE');
  });

  test('validates the file after defaults, with the line of the field', async () => {
    const err = await rejects(
      ['--config=/c.yaml'],
      { '/c.yaml': `${HEADER}imageGCHighThresholdPercent: 70\nnodeLeaseDurationSeconds: -5\n` },
      /^Cannot load \/c.yaml: 2 problems:/,
    );
    assert.match(
      err.message,
      /field "imageGCLowThresholdPercent": must be less than imageGCHighThresholdPercent \(70\), got 80$/,
    );
    assert.match(
      err.message,
      /field "nodeLeaseDurationSeconds": must be greater than 0, got -5 \(line 4, column 27\)/,
    );
  });

  test('validates flag values after they override the file, naming the flag', async () => {
    const err = await rejects(
      ['--config=/c.yaml', '--max-pods=-1'],
      { '/c.yaml': `${HEADER}maxPods: 10\n` },
      /^Invalid configuration: field "maxPods" \(set by --max-pods\): must not be negative, got -1$/,
    );
    assert.equal(err.issues[0]?.source, 'flags');
  });

  test('rejects a node name that is not a DNS subdomain', async () => {
    await rejects(
      ['--hostname-override=bad_name'],
      {},
      /invalid node name "bad_name" from --hostname-override/,
    );
    await assert.rejects(
      loadConfig([], { ...fakes(), hostname: () => '  ' }),
      /invalid node name "" from the hostname: must not be empty/,
    );
  });

  test('warns about a runtime endpoint without a scheme', async () => {
    const c = await loadConfig(
      ['--container-runtime-endpoint=/run/containerd/containerd.sock'],
      fakes(),
    );
    assert.ok(c.warnings.some((w) => w.includes('write unix:///run/containerd/containerd.sock')));
  });
});
