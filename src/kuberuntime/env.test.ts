import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigMap, Container, Pod, Secret, Service } from 'kubernetes-types/core/v1.js';
import { KubeApiError } from '../kube/types.ts';
import { HostDownwardResolver } from './downward.ts';
import {
  EnvError,
  envMap,
  expandCommand,
  InvalidEnvKeysError,
  makeEnvironment,
  type EnvironmentDeps,
} from './env.ts';
import { indexOfWork } from './testing.ts';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

interface World {
  configMaps?: Record<string, ConfigMap>;
  secrets?: Record<string, Secret>;
  services?: Service[];
  failWith?: Error;
}

function deps(world: World = {}): EnvironmentDeps & { gets: string[] } {
  const gets: string[] = [];
  return {
    gets,
    services: (ns) => (world.services ?? []).filter((s) => s.metadata?.namespace === ns),
    getConfigMap: (ns, name) => {
      gets.push(`cm ${ns}/${name}`);
      if (world.failWith !== undefined) return Promise.reject(world.failWith);
      return Promise.resolve(world.configMaps?.[name]);
    },
    getSecret: (ns, name) => {
      gets.push(`secret ${ns}/${name}`);
      const s = world.secrets?.[name];
      if (s === undefined) {
        return Promise.reject(new KubeApiError(404, 'NotFound', `secrets "${name}" not found`));
      }
      return Promise.resolve(s);
    },
    downward: new HostDownwardResolver({
      hostIPs: () => ['192.168.1.2'],
      podIPs: () => ['10.244.0.5'],
      nodeAllocatable: () => ({ cpu: '4', memory: '8Gi' }),
    }),
  };
}

function podWith(container: Container, extra: Partial<Pod['spec']> = {}): Pod {
  return {
    metadata: { name: 'p', namespace: 'ns', uid: 'u1', labels: { app: 'x' } },
    spec: { nodeName: 'n1', containers: [container], ...extra },
  };
}

const signal = new AbortController().signal;

async function envOf(container: Container, world: World = {}, extra: Partial<Pod['spec']> = {}) {
  const d = deps(world);
  const result = await makeEnvironment(podWith(container, extra), container, d, signal);
  return { ...result, map: envMap(result.env), gets: d.gets };
}

describe('makeEnvironment', () => {
  it('expands values against earlier variables only', async () => {
    const { env } = await envOf({
      name: 'c',
      env: [
        { name: 'A', value: 'a' },
        { name: 'B', value: '$(A)-$(C)' },
        { name: 'C', value: 'c' },
        { name: 'D', value: '$$(A) $(A)$(C)' },
        { name: 'E', value: '' },
        { name: 'F' },
      ],
    });
    assert.deepEqual(env, [
      { name: 'A', value: 'a' },
      { name: 'B', value: 'a-$(C)' },
      { name: 'C', value: 'c' },
      { name: 'D', value: '$(A) ac' },
      { name: 'E', value: '' },
      { name: 'F', value: '' },
    ]);
  });

  it('terminates on self references and loops, leaving them as written', async () => {
    const { map } = await envOf({
      name: 'c',
      env: [
        { name: 'SELF', value: '$(SELF)' },
        { name: 'X', value: '$(Y)' },
        { name: 'Y', value: '$(X)' },
        { name: 'SELF', value: '$(SELF)$(SELF)' },
      ],
    });
    assert.equal(map.get('SELF'), '$(SELF)$(SELF)');
    assert.equal(map.get('X'), '$(Y)');
    assert.equal(map.get('Y'), '$(Y)');
  });

  it('passes an absurdly long value through unchanged', async () => {
    const long = 'x$('.repeat(349_526);
    const { result, scanned } = await indexOfWork(() =>
      envOf({ name: 'c', env: [{ name: 'BIG', value: long }] }),
    );
    assert.equal(result.map.get('BIG'), long);
    // Linear: each character examined a bounded number of times (a rescan per `$(`
    // would examine ~long.length² / 6).
    assert.ok(scanned <= 10 * long.length, `examined ${String(scanned)} characters`);
  });

  it('orders service variables, envFrom, then env, later ones overriding', async () => {
    const { env } = await envOf(
      {
        name: 'c',
        envFrom: [{ configMapRef: { name: 'cm' } }, { prefix: 'S_', secretRef: { name: 'sec' } }],
        env: [
          { name: 'K2', value: 'from-env' },
          { name: 'WEB_SERVICE_HOST', value: 'mine' },
          { name: 'REF', value: '$(WEB_SERVICE_PORT)/$(K1)' },
        ],
      },
      {
        configMaps: { cm: { data: { K2: 'cm2', K1: 'cm1' } } },
        secrets: { sec: { data: { pw: b64('hunter2') } } },
        services: [
          {
            metadata: { namespace: 'ns', name: 'web' },
            spec: { clusterIP: '10.0.0.9', ports: [{ port: 8080 }] },
          },
        ],
      },
    );
    const names = env.map((e) => e.name);
    assert.equal(names[0], 'WEB_SERVICE_HOST');
    assert.deepEqual(names.slice(-4), ['K1', 'K2', 'S_pw', 'REF']);
    const map = envMap(env);
    assert.equal(map.get('WEB_SERVICE_HOST'), 'mine');
    assert.equal(map.get('K2'), 'from-env');
    assert.equal(map.get('S_pw'), 'hunter2');
    assert.equal(map.get('REF'), '8080/cm1');
    assert.equal(new Set(names).size, names.length);
  });

  it('adds the kubernetes service even with service links off', async () => {
    const services: Service[] = [
      {
        metadata: { namespace: 'default', name: 'kubernetes' },
        spec: { clusterIP: '10.96.0.1', ports: [{ port: 443 }] },
      },
      {
        metadata: { namespace: 'ns', name: 'web' },
        spec: { clusterIP: '10.0.0.9', ports: [{ port: 80 }] },
      },
    ];
    const off = await envOf({ name: 'c' }, { services }, { enableServiceLinks: false });
    assert.equal(off.map.get('KUBERNETES_SERVICE_HOST'), '10.96.0.1');
    assert.equal(off.map.has('WEB_SERVICE_HOST'), false);
    const on = await envOf({ name: 'c' }, { services });
    assert.equal(on.map.get('WEB_PORT'), 'tcp://10.0.0.9:80');
  });

  it('resolves fieldRef and resourceFieldRef', async () => {
    const { map } = await envOf({
      name: 'c',
      resources: { limits: { memory: '64Mi' } },
      env: [
        { name: 'NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        {
          name: 'APP',
          valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: "metadata.labels['app']" } },
        },
        { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
        { name: 'HOST', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
        { name: 'IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
        {
          name: 'MEM',
          valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } },
        },
        {
          name: 'CPU',
          valueFrom: {
            resourceFieldRef: { containerName: 'c', resource: 'limits.cpu', divisor: '1m' },
          },
        },
      ],
    });
    assert.deepEqual(Object.fromEntries(map), {
      NAME: 'p',
      APP: 'x',
      NODE: 'n1',
      HOST: '192.168.1.2',
      IP: '10.244.0.5',
      MEM: '64',
      CPU: '4000',
    });
  });

  it('turns bad field references into EnvError', async () => {
    const bad = (fieldPath: string, apiVersion?: string) =>
      envOf({
        name: 'c',
        env: [
          {
            name: 'X',
            valueFrom: {
              fieldRef: { fieldPath, ...(apiVersion === undefined ? {} : { apiVersion }) },
            },
          },
        ],
      });
    await assert.rejects(bad('spec.bogus'), (err: unknown) => {
      assert.ok(err instanceof EnvError);
      assert.equal(err.code, 'BERTH_ENV_FIELD_ERROR');
      assert.equal(err.message, 'unsupported fieldPath: spec.bogus');
      return true;
    });
    await assert.rejects(bad('metadata.name', 'v2'), { message: 'unsupported pod version: v2' });
  });

  it('reads configMap and secret keys, honouring optional', async () => {
    const world: World = {
      configMaps: { cm: { data: { k: 'v' } } },
      secrets: { s: { data: { token: b64('t0k3n') } } },
    };
    const { map, gets } = await envOf(
      {
        name: 'c',
        env: [
          { name: 'A', valueFrom: { configMapKeyRef: { name: 'cm', key: 'k' } } },
          { name: 'B', valueFrom: { secretKeyRef: { name: 's', key: 'token' } } },
          {
            name: 'C',
            valueFrom: { configMapKeyRef: { name: 'cm', key: 'nope', optional: true } },
          },
          { name: 'D', valueFrom: { configMapKeyRef: { name: 'gone', key: 'k', optional: true } } },
          { name: 'E', valueFrom: { secretKeyRef: { name: 'gone', key: 'k', optional: true } } },
          { name: 'F', valueFrom: { configMapKeyRef: { name: 'cm', key: 'k' } } },
        ],
      },
      world,
    );
    assert.deepEqual(Object.fromEntries(map), { A: 'v', B: 't0k3n', F: 'v' });
    // Each object is read once per container.
    assert.deepEqual(gets, ['cm ns/cm', 'secret ns/s', 'cm ns/gone', 'secret ns/gone']);
  });

  it('fails with upstream messages for missing objects and keys', async () => {
    const world: World = { configMaps: { cm: { data: { k: 'v' } } }, secrets: { s: { data: {} } } };
    const one = (env: Container['env']) =>
      envOf({ name: 'c', ...(env === undefined ? {} : { env }) }, world);
    await assert.rejects(
      one([{ name: 'A', valueFrom: { configMapKeyRef: { name: 'cm', key: 'k2' } } }]),
      {
        code: 'BERTH_ENV_KEY_NOT_FOUND',
        message: "couldn't find key k2 in ConfigMap ns/cm",
      },
    );
    await assert.rejects(
      one([{ name: 'A', valueFrom: { configMapKeyRef: { name: 'nope', key: 'k' } } }]),
      {
        code: 'BERTH_ENV_CONFIGMAP_NOT_FOUND',
        message: 'configmap "nope" not found',
      },
    );
    await assert.rejects(
      one([{ name: 'A', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }]),
      {
        message: "couldn't find key k in Secret ns/s",
      },
    );
    await assert.rejects(
      one([{ name: 'A', valueFrom: { secretKeyRef: { name: 'x', key: 'k' } } }]),
      {
        code: 'BERTH_ENV_SECRET_NOT_FOUND',
        message: 'secret "x" not found',
      },
    );
    await assert.rejects(
      envOf({ name: 'c', envFrom: [{ configMapRef: { name: 'nope' } }] }, world),
      {
        message: 'configmap "nope" not found',
      },
    );
  });

  it('wraps other API failures, even for optional sources', async () => {
    const boom = new KubeApiError(500, 'InternalError', 'etcd is sad');
    await assert.rejects(
      envOf(
        { name: 'c', envFrom: [{ configMapRef: { name: 'cm', optional: true } }] },
        { failWith: boom },
      ),
      (err: unknown) =>
        err instanceof EnvError && err.code === 'BERTH_ENV_SOURCE_ERROR' && err.cause === boom,
    );
  });

  it('passes relaxed envFrom names through and reports only impossible ones', async () => {
    const { map, errors } = await envOf(
      {
        name: 'c',
        envFrom: [
          { configMapRef: { name: 'cm' } },
          { prefix: '1', secretRef: { name: 's' } },
          { prefix: 'OK_', configMapRef: { name: 'missing', optional: true } },
        ],
      },
      {
        configMaps: { cm: { data: { good: '1', 'b=ad': '2', '2bad': '3', 'a.b-c': '4' } } },
        secrets: { s: { data: { X: b64('x') } } },
      },
    );
    // v1.37: relaxed names pass (2bad, 1X); only '=' cannot be in a name.
    assert.deepEqual(Object.fromEntries(map), { '1X': 'x', '2bad': '3', 'a.b-c': '4', good: '1' });
    assert.equal(errors.length, 1);
    const [cm] = errors;
    assert.ok(cm instanceof InvalidEnvKeysError);
    assert.equal(cm.reason, 'InvalidEnvironmentVariableNames');
    assert.deepEqual(cm.keys, ['b=ad']);
    assert.equal(
      cm.message,
      'Keys [b=ad] from the EnvFrom configMap ns/cm were skipped since they are considered invalid environment variable names.',
    );
  });

  it('treats prototype names as ordinary keys', async () => {
    const data = JSON.parse('{"__proto__":"p","constructor":"c"}') as Record<string, string>;
    const world: World = { configMaps: { cm: { data } }, secrets: { s: { data: {} } } };
    const { map } = await envOf(
      {
        name: 'c',
        envFrom: [{ prefix: 'X', configMapRef: { name: 'cm' } }],
        env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'cm', key: 'constructor' } } }],
      },
      world,
    );
    assert.deepEqual(Object.fromEntries(map), { X__proto__: 'p', Xconstructor: 'c', A: 'c' });
    await assert.rejects(
      envOf(
        {
          name: 'c',
          env: [{ name: 'B', valueFrom: { secretKeyRef: { name: 's', key: 'toString' } } }],
        },
        world,
      ),
      { code: 'BERTH_ENV_KEY_NOT_FOUND' },
    );
  });

  it('rejects env names no environment can carry', async () => {
    await assert.rejects(envOf({ name: 'c', env: [{ name: 'A=B', value: 'x' }] }), {
      code: 'BERTH_ENV_INVALID_NAME',
    });
    await assert.rejects(envOf({ name: 'c', env: [{ name: '', value: 'x' }] }), EnvError);
  });
});

describe('service sync gate', () => {
  it('fails API pods until services were listed, but not static pods', async () => {
    const c: Container = { name: 'c', env: [{ name: 'A', value: 'a' }] };
    const d = { ...deps(), servicesSynced: () => false };
    await assert.rejects(makeEnvironment(podWith(c), c, d, signal), {
      code: 'BERTH_ENV_SERVICES_NOT_SYNCED',
      message: 'services have not yet been read at least once, cannot construct envvars',
    });
    const staticPod = podWith(c);
    staticPod.metadata = {
      ...staticPod.metadata,
      annotations: { 'kubernetes.io/config.source': 'file' },
    };
    const { env } = await makeEnvironment(staticPod, c, d, signal);
    assert.deepEqual(env, [{ name: 'A', value: 'a' }]);
    const synced = await makeEnvironment(
      podWith(c),
      c,
      { ...deps(), servicesSynced: () => true },
      signal,
    );
    assert.deepEqual(synced.env, [{ name: 'A', value: 'a' }]);
  });
});

describe('expandCommand', () => {
  it('expands command and args from the environment', () => {
    const env = [
      { name: 'A', value: 'a' },
      { name: 'B', value: 'b' },
      { name: 'A', value: 'last' },
    ];
    assert.deepEqual(
      expandCommand(
        { name: 'c', command: ['sh', '-c', 'echo $(A)'], args: ['$(B)', '$$(B)', '$(NONE)'] },
        env,
      ),
      { command: ['sh', '-c', 'echo last'], args: ['b', '$(B)', '$(NONE)'] },
    );
    assert.deepEqual(expandCommand({ name: 'c' }, env), { command: [], args: [] });
  });
});

describe('fileKeyRef (EnvFiles)', () => {
  const files: Record<string, string> = {
    'cfg/app.env': "NAME='berth'\nEMPTY=''\n",
    'bad.env': 'X=1\n',
  };
  function withFiles(): EnvironmentDeps {
    return {
      ...deps(),
      readVolumeFile: (volume, rel) => {
        if (volume !== 'data') return undefined;
        const text = files[rel];
        return text === undefined
          ? Promise.reject(new Error(`${rel}: no such file`))
          : Promise.resolve({ text, hostPath: `/pods/u1/volumes/data/${rel}` });
      },
    };
  }
  const ref = (key: string, extra: Record<string, unknown> = {}): Container => ({
    name: 'c',
    env: [
      {
        name: 'V',
        valueFrom: { fileKeyRef: { volumeName: 'data', path: 'cfg/app.env', key, ...extra } },
      } as never,
    ],
  });
  async function run(c: Container): Promise<Map<string, string>> {
    return envMap((await makeEnvironment(podWith(c), c, withFiles(), signal)).env);
  }

  it('reads the key from the file in the volume', async () => {
    assert.equal((await run(ref('NAME'))).get('V'), 'berth');
  });

  it('a missing key fails with upstream words, or is skipped when optional', async () => {
    await assert.rejects(run(ref('NOPE')), {
      message:
        'environment variable key "NOPE" not found in file "/pods/u1/volumes/data/cfg/app.env"',
    });
    await assert.rejects(run(ref('EMPTY')), /not found in file/);
    assert.equal((await run(ref('NOPE', { optional: true }))).has('V'), false);
  });

  it('an unknown volume and a malformed or missing file are errors', async () => {
    await assert.rejects(run(ref('NAME', { volumeName: 'other' })), {
      message: 'cannot find the volume "other" referenced by FileKeyRef',
    });
    await assert.rejects(run(ref('X', { path: 'bad.env' })), {
      message: "couldn't parse env file",
    });
    await assert.rejects(run(ref('X', { path: 'gone.env' })), {
      message: "couldn't parse env file",
    });
  });
});
