/**
 * CSI for a test cluster, from real components (hack/build-go.sh csi builds them):
 * - upstream's CSI mock driver (k8s.io/kubernetes test/e2e/storage/drivers/csi-test)
 *   behind a main of ours (hack/go/csi-mock): controller, node and identity on one unix
 *   socket, <node root>/plugins/<driver>/csi.sock, as upstream's CSI mock e2e runs it. It
 *   mounts nothing: NodePublishVolume only makes the target directory and
 *   NodeUnpublishVolume removes it; NodeStage/NodeUnstage touch no files. Every gRPC call
 *   is logged as a `gRPCCall: {json}` line, parsed here into `calls()`;
 * - csi-registrar (ours, standing in for node-driver-registrar) serving the kubelet's
 *   plugin registration on <node root>/plugins_registry/<driver>-reg.sock;
 * - csi-provisioner and csi-attacher as host processes, each under supervise.ts (they
 *   exit by design when the driver's connection is lost, and a Deployment would restart
 *   them), with client certificates of their own (users csi-provisioner, csi-attacher)
 *   bound to upstream's ClusterRoles from their deploy/kubernetes/rbac.yaml;
 * - the CSIDriver object and a StorageClass.
 *
 * The driver keeps its volumes across restarts (its --state-file), so the fault tests can
 * kill it and start it again; --faults delays or fails chosen calls.
 *
 * Everything lives under the cluster root (or the node's root directory), so a cluster
 * teardown also ends these processes if a test never called stop().
 */
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { cacheDir, pinnedVersions, REPO_ROOT } from './binaries.ts';
import type { Cluster } from './cluster.ts';
import { kubeconfig, makeLeaf } from './pki.ts';
import { ComponentProcess, waitFor } from './process.ts';

const execFileAsync = promisify(execFile);
const NODE_BINARY = join(REPO_ROOT, 'node_modules/.bin/node');
const SUPERVISE = join(REPO_ROOT, 'test/harness/supervise.ts');
const MOCK_MODULE = join(REPO_ROOT, 'hack/go/csi-mock');
/**
 * The default driver name: short, because <root>/plugins_registry/<name>-reg.sock must fit
 * a unix socket path (108 bytes) under a test cluster's temporary directory.
 */
export const MOCK_DRIVER_NAME = 'csi-mock.berth';
/** sun_path is 108 bytes with its terminating NUL. */
const MAX_SOCKET_PATH = 107;

export interface CsiBinaries {
  readonly mock: string;
  readonly registrar: string;
  readonly provisioner: string;
  readonly attacher: string;
}

function executable(path: string): string {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`Cannot find ${path}: run \`make deps\` (or hack/build-go.sh csi) to build it`);
  }
  return path;
}

/** hack/build-go.sh's source_key: sha256sum of each file (sorted "./path"), then of that list. */
async function sourceKey(dir: string): Promise<string> {
  const files: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile() && (e.name.endsWith('.go') || e.name === 'go.mod' || e.name === 'go.sum'))
        files.push(`./${relative(dir, p)}`);
    }
  };
  await walk(dir);
  // LC_ALL=C sort: byte order.
  files.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  let list = '';
  for (const f of files) {
    const sum = createHash('sha256')
      .update(await readFile(join(dir, f)))
      .digest('hex');
    list += `${sum}  ${f}\n`;
  }
  return createHash('sha256').update(list).digest('hex').slice(0, 12);
}

/** The binaries hack/build-go.sh built for the pinned versions and the current mock sources. */
export async function csiBinaries(): Promise<CsiBinaries> {
  const v = pinnedVersions();
  const need = (key: string): string => {
    const value = v[key];
    if (value === undefined)
      throw new Error(`Cannot locate the CSI binaries: versions.env has no ${key}`);
    return value;
  };
  const bin = join(cacheDir(), 'bin');
  const mockDir = join(
    bin,
    `csi-mock-${need('KUBERNETES_VERSION')}-${await sourceKey(MOCK_MODULE)}`,
  );
  return {
    mock: executable(join(mockDir, 'csi-mock')),
    registrar: executable(join(mockDir, 'csi-registrar')),
    provisioner: executable(
      join(bin, `csi-provisioner-${need('CSI_PROVISIONER_VERSION')}`, 'csi-provisioner'),
    ),
    attacher: executable(join(bin, `csi-attacher-${need('CSI_ATTACHER_VERSION')}`, 'csi-attacher')),
  };
}

/** One call to the driver, from its `gRPCCall:` log line. */
export interface CsiCall {
  /** Short name, e.g. NodeStageVolume. */
  readonly method: string;
  /** e.g. /csi.v1.Node/NodeStageVolume */
  readonly fullMethod: string;
  /** The request as Go's encoding/json renders the protobuf (snake_case field names). */
  readonly request: Readonly<Record<string, unknown>>;
  readonly response: unknown;
  /** '' on success, else the gRPC error text ("rpc error: code = NotFound desc = 4"). */
  readonly error: string;
  /** The gRPC status code (0 on success). */
  readonly code: number;
  /** Which start of the driver answered it (1 = the first). */
  readonly generation: number;
}

interface CallLine {
  readonly Method?: string;
  readonly Request?: Record<string, unknown> | null;
  readonly Response?: unknown;
  readonly Error?: string;
  readonly FullError?: { readonly code?: number } | null;
}

const STARTED = 'csi-mock: driver ';

/** Parses the driver's log (all of its runs, appended) into calls. */
export function parseCalls(log: string): CsiCall[] {
  const calls: CsiCall[] = [];
  let generation = 0;
  for (const line of log.split('\n')) {
    if (line.includes(STARTED)) generation++;
    const at = line.indexOf('gRPCCall: ');
    if (at < 0) continue;
    let parsed: CallLine;
    try {
      parsed = JSON.parse(line.slice(at + 'gRPCCall: '.length)) as CallLine;
    } catch {
      // A line cut short by a kill.
      continue;
    }
    const fullMethod = parsed.Method ?? '';
    calls.push({
      method: fullMethod.slice(fullMethod.lastIndexOf('/') + 1),
      fullMethod,
      request: parsed.Request ?? {},
      response: parsed.Response ?? null,
      error: parsed.Error ?? '',
      code: parsed.FullError?.code ?? 0,
      generation,
    });
  }
  return calls;
}

/** A delay and/or error for one method, read by the driver on every call. */
export interface CsiFault {
  /** Go duration, e.g. "30s"; the caller's deadline still ends the call. */
  readonly delay?: string;
  /** gRPC code name, e.g. "Unavailable", "ResourceExhausted". */
  readonly code?: string;
  readonly message?: string;
}

export interface CsiOptions {
  /** The node the driver runs on. */
  readonly nodeName: string;
  /** That node's kubelet root directory (plugins_registry/ and plugins/ are under it). */
  readonly rootDir: string;
  /** Default MOCK_DRIVER_NAME. */
  readonly driverName?: string;
  /** The node ID NodeGetInfo reports (default: the node name). */
  readonly nodeId?: string;
  /** CSIDriver spec.attachRequired, and whether the mock offers ControllerPublish (default true). */
  readonly attachRequired?: boolean;
  /** CSIDriver spec.podInfoOnMount (default false). */
  readonly podInfoOnMount?: boolean;
  /** CSIDriver spec.volumeLifecycleModes (default ['Persistent']). */
  readonly volumeLifecycleModes?: readonly ('Persistent' | 'Ephemeral')[];
  /** CSIDriver spec.fsGroupPolicy (default: the API's, ReadWriteOnceWithFSType). */
  readonly fsGroupPolicy?: 'None' | 'File' | 'ReadWriteOnceWithFSType';
  /** CSIDriver spec.tokenRequests (default none). */
  readonly tokenRequests?: readonly { audience: string; expirationSeconds?: number }[];
  /** CSIDriver spec.requiresRepublish (default false). */
  readonly requiresRepublish?: boolean;
  /** Create the CSIDriver object (default true; false tests a driver Kubernetes does not know). */
  readonly createCsiDriver?: boolean;
  /** The StorageClass (default name csi-mock, Immediate binding, expansion allowed). */
  readonly storageClass?: {
    readonly name?: string;
    readonly volumeBindingMode?: 'Immediate' | 'WaitForFirstConsumer';
    readonly parameters?: Readonly<Record<string, string>>;
  };
  /** The mock's other settings. */
  readonly mock?: {
    readonly attachLimit?: number;
    readonly nodeExpansion?: boolean;
    readonly disableControllerExpansion?: boolean;
    readonly permissiveTargetPath?: boolean;
    readonly enableTopology?: boolean;
    readonly volumeMountGroup?: boolean;
    /**
     * Real devices for block volumes (the mock's --block-dir): a loop device over a
     * backing file in <dir>/block per volume. Needs root and /dev/loop-control.
     */
    readonly blockDevices?: boolean;
  };
  /** Run csi-provisioner and csi-attacher (default true). */
  readonly sidecars?: boolean;
  readonly log?: (message: string) => void;
}

export interface Csi {
  readonly driverName: string;
  readonly nodeId: string;
  readonly storageClassName: string;
  /** The driver's socket, which GetInfo tells the kubelet. */
  readonly driverSocket: string;
  /** The registration socket in <root dir>/plugins_registry/. */
  readonly registrationSocket: string;
  /** Logs, state and kubeconfigs: <cluster root>/csi/<driver>. */
  readonly dir: string;
  /** The current driver process (replaced by startDriver). */
  driver(): ComponentProcess | undefined;
  registrar(): ComponentProcess | undefined;
  readonly provisioner: ComponentProcess | undefined;
  readonly attacher: ComponentProcess | undefined;
  /** Every call the driver answered so far, across restarts, in order. */
  calls(): Promise<CsiCall[]>;
  /** Waits for a call matching `match` and returns it. */
  waitForCall(
    what: string,
    match: (call: CsiCall) => boolean,
    options?: { timeoutMs?: number },
  ): Promise<CsiCall>;
  /** SIGTERM (socket removed) or SIGKILL (socket left behind) the driver. */
  stopDriver(options?: { kill?: boolean }): Promise<void>;
  /** Starts the driver again (its volumes replayed from the state file); waits for its socket. */
  startDriver(): Promise<void>;
  /** SIGTERM the registrar: it removes its socket and the kubelet deregisters the driver. */
  stopRegistrar(): Promise<void>;
  startRegistrar(): Promise<void>;
  /** Replaces the driver's fault table (an empty object clears it). */
  setFaults(faults: Readonly<Record<string, CsiFault>>): Promise<void>;
  /** Stops every process and deletes the StorageClass and CSIDriver. Idempotent. */
  stop(): Promise<void>;
}

/** Upstream's ClusterRoles for the two sidecars (deploy/kubernetes/rbac.yaml), bound to users. */
export function csiSidecarRbac(users: { provisioner: string; attacher: string }): unknown[] {
  const role = (name: string, rules: unknown[]): unknown => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name },
    rules,
  });
  const binding = (name: string, user: string): unknown => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
  });
  const r = (group: string, resources: string[], verbs: string[]): unknown => ({
    apiGroups: [group],
    resources,
    verbs,
  });
  const read = ['get', 'list', 'watch'];
  return [
    role('external-provisioner-runner', [
      r('', ['persistentvolumes'], [...read, 'create', 'patch', 'delete']),
      r('', ['persistentvolumeclaims'], [...read, 'update']),
      r('storage.k8s.io', ['storageclasses'], read),
      r('', ['events'], ['list', 'watch', 'create', 'update', 'patch']),
      r('snapshot.storage.k8s.io', ['volumesnapshots'], [...read, 'update']),
      r('snapshot.storage.k8s.io', ['volumesnapshotcontents'], ['get', 'list']),
      r('storage.k8s.io', ['csinodes'], read),
      r('', ['nodes'], read),
      r('storage.k8s.io', ['volumeattachments'], read),
    ]),
    binding('external-provisioner-runner', users.provisioner),
    role('external-attacher-runner', [
      r('', ['persistentvolumes'], [...read, 'patch']),
      r('storage.k8s.io', ['csinodes'], read),
      r('storage.k8s.io', ['volumeattachments'], [...read, 'patch']),
      r('storage.k8s.io', ['volumeattachments/status'], ['patch']),
    ]),
    binding('external-attacher-runner', users.attacher),
  ];
}

function socketPath(path: string, what: string): string {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    throw new Error(
      `Cannot use ${path} as the ${what}: a unix socket path is at most ${MAX_SOCKET_PATH} bytes (use a shorter cluster root or node name)`,
    );
  }
  return path;
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/** The loop devices whose backing file is under `dir` (from sysfs), e.g. /dev/loop3. */
export async function loopsUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of await readdir('/sys/block').catch(() => [] as string[])) {
    if (!name.startsWith('loop')) continue;
    const backing = await readFile(join('/sys/block', name, 'loop/backing_file'), 'utf8').catch(
      () => '',
    );
    if (backing.startsWith(`${dir}/`)) out.push(`/dev/${name}`);
  }
  return out.sort();
}

async function detachLoopsUnder(dir: string, log: (message: string) => void): Promise<void> {
  for (const device of await loopsUnder(dir)) {
    log(`detaching ${device}, left under ${dir}`);
    await execFileAsync('losetup', ['-d', device]).catch((e: unknown) => {
      log(`losetup -d ${device}: ${String(e)}`);
    });
  }
}

/** Starts the driver, its registrar, the sidecars, and creates the CSIDriver and StorageClass. */
export async function startCsi(cluster: Cluster, o: CsiOptions): Promise<Csi> {
  const log = o.log ?? (() => undefined);
  const bin = await csiBinaries();
  const driverName = o.driverName ?? MOCK_DRIVER_NAME;
  const nodeId = o.nodeId ?? o.nodeName;
  const attachRequired = o.attachRequired ?? true;
  const storageClassName = o.storageClass?.name ?? 'csi-mock';
  const dir = join(cluster.root, 'csi', driverName);
  const driverSocket = socketPath(
    join(o.rootDir, 'plugins', driverName, 'csi.sock'),
    'driver socket',
  );
  const registrationSocket = socketPath(
    join(o.rootDir, 'plugins_registry', `${driverName}-reg.sock`),
    'registration socket',
  );
  const faultsFile = join(dir, 'faults.json');
  await mkdir(join(dir, 'pki'), { recursive: true, mode: 0o700 });
  await mkdir(join(o.rootDir, 'plugins', driverName), { recursive: true, mode: 0o750 });
  await mkdir(join(o.rootDir, 'plugins_registry'), { recursive: true, mode: 0o750 });
  await writeFile(faultsFile, '{}\n');

  const kubectl = (args: readonly string[], input?: string): Promise<string> =>
    cluster.kubectl(
      ['--cache-dir', join(cluster.root, 'kubectl-cache'), ...args],
      input === undefined ? undefined : { input },
    );
  const apply = (objects: readonly unknown[]): Promise<string> =>
    kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    );

  const m = o.mock ?? {};
  const mockArgs = [
    `--endpoint=${driverSocket}`,
    `--driver-name=${driverName}`,
    `--node-id=${nodeId}`,
    `--attach-required=${String(attachRequired)}`,
    `--attach-limit=${String(m.attachLimit ?? 0)}`,
    `--node-expansion=${String(m.nodeExpansion ?? false)}`,
    `--disable-controller-expansion=${String(m.disableControllerExpansion ?? false)}`,
    `--permissive-target-path=${String(m.permissiveTargetPath ?? false)}`,
    `--enable-topology=${String(m.enableTopology ?? false)}`,
    `--volume-mount-group=${String(m.volumeMountGroup ?? false)}`,
    `--state-file=${join(dir, 'state.jsonl')}`,
    `--faults=${faultsFile}`,
    ...(m.blockDevices === true ? [`--block-dir=${join(dir, 'block')}`] : []),
  ];
  const driverLog = join(dir, 'csi-mock.log');
  let driver: ComponentProcess | undefined;
  let registrar: ComponentProcess | undefined;

  const startDriver = async (): Promise<void> => {
    if (driver?.alive() === true)
      throw new Error(`Cannot start the CSI driver: pid ${driver.pid} runs`);
    const proc = ComponentProcess.start({
      name: `csi-mock-${o.nodeName}`,
      command: bin.mock,
      args: mockArgs,
      logFile: driverLog,
    });
    driver = proc;
    await waitFor(
      `CSI driver ${driverName} serving on ${driverSocket}`,
      async () => {
        if (!proc.alive()) throw new Error(`csi-mock exited:\n${await proc.tail()}`);
        return (await proc.tail(5)).includes(`${STARTED}${driverName}`);
      },
      { timeoutMs: 30_000, intervalMs: 100, describe: () => proc.tail() },
    );
  };
  const startRegistrar = async (): Promise<void> => {
    if (registrar?.alive() === true)
      throw new Error(`Cannot start the registrar: pid ${registrar.pid} runs`);
    const proc = ComponentProcess.start({
      name: `csi-registrar-${o.nodeName}`,
      command: bin.registrar,
      args: [
        `--driver-name=${driverName}`,
        `--csi-address=${driverSocket}`,
        `--socket=${registrationSocket}`,
      ],
      logFile: join(dir, 'csi-registrar.log'),
    });
    registrar = proc;
    await waitFor(
      `registration socket ${registrationSocket}`,
      async () => {
        if (!proc.alive()) throw new Error(`csi-registrar exited:\n${await proc.tail()}`);
        return (
          (await proc.tail(5)).includes('registering through') && (await exists(registrationSocket))
        );
      },
      { timeoutMs: 30_000, intervalMs: 100, describe: () => proc.tail() },
    );
  };

  const sidecars: ComponentProcess[] = [];
  let provisioner: ComponentProcess | undefined;
  let attacher: ComponentProcess | undefined;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      // Sidecars first (they exit when the driver goes), then the registrar (the kubelet
      // deregisters), then the driver.
      await Promise.all(sidecars.map((p) => p.stop(10_000)));
      await registrar?.stop(5000);
      await driver?.stop(5000);
      await kubectl([
        'delete',
        'storageclass',
        storageClassName,
        '--ignore-not-found',
        '--wait=false',
      ]).catch((e: unknown) => {
        log(`deleting StorageClass ${storageClassName}: ${String(e)}`);
      });
      if (o.createCsiDriver !== false) {
        await kubectl([
          'delete',
          'csidriver',
          driverName,
          '--ignore-not-found',
          '--wait=false',
        ]).catch((e: unknown) => {
          log(`deleting CSIDriver ${driverName}: ${String(e)}`);
        });
      }
      await rm(registrationSocket, { force: true });
      // Loop devices are the host's: none may outlive the test, whoever attached them
      // (the mock over its backing files, berth over the bind mounts it holds open).
      await detachLoopsUnder(cluster.root, log);
    })();
    return stopped;
  };

  try {
    const objects: unknown[] = [
      {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'StorageClass',
        metadata: { name: storageClassName },
        provisioner: driverName,
        reclaimPolicy: 'Delete',
        volumeBindingMode: o.storageClass?.volumeBindingMode ?? 'Immediate',
        allowVolumeExpansion: true,
        ...(o.storageClass?.parameters !== undefined && { parameters: o.storageClass.parameters }),
      },
    ];
    if (o.createCsiDriver !== false) {
      objects.push({
        apiVersion: 'storage.k8s.io/v1',
        kind: 'CSIDriver',
        metadata: { name: driverName },
        spec: {
          attachRequired,
          podInfoOnMount: o.podInfoOnMount ?? false,
          volumeLifecycleModes: o.volumeLifecycleModes ?? ['Persistent'],
          ...(o.fsGroupPolicy !== undefined && { fsGroupPolicy: o.fsGroupPolicy }),
          ...(o.tokenRequests !== undefined && { tokenRequests: o.tokenRequests }),
          ...(o.requiresRepublish !== undefined && { requiresRepublish: o.requiresRepublish }),
        },
      });
    }
    await apply(objects);
    await startDriver();
    await startRegistrar();

    if (o.sidecars !== false) {
      const users = { provisioner: 'csi-provisioner', attacher: 'csi-attacher' };
      await apply(csiSidecarRbac(users));
      const server = cluster.controlPlane.server;
      const sidecar = async (
        name: 'provisioner' | 'attacher',
        extra: string[],
      ): Promise<ComponentProcess> => {
        const client = await makeLeaf(join(dir, 'pki'), cluster.pki.ca, {
          name: `csi-${name}`,
          subject: `/CN=${users[name]}`,
          usage: 'clientAuth',
        });
        const file = join(dir, `csi-${name}.kubeconfig`);
        await writeFile(file, kubeconfig(server, cluster.pki.ca.cert, client, users[name]), {
          mode: 0o600,
        });
        const proc = ComponentProcess.start({
          name: `csi-${name}`,
          command: NODE_BINARY,
          args: [
            SUPERVISE,
            bin[name],
            `--kubeconfig=${file}`,
            `--csi-address=${driverSocket}`,
            '--leader-election=false',
            '--v=5',
            ...extra,
          ],
          logFile: join(dir, `csi-${name}.log`),
        });
        sidecars.push(proc);
        return proc;
      };
      provisioner = await sidecar('provisioner', []);
      if (attachRequired) attacher = await sidecar('attacher', []);
      // Both ask the driver for its name and capabilities once connected.
      await waitFor(
        'csi-provisioner to connect to the driver',
        async () =>
          (await readFile(driverLog, 'utf8')).includes(
            '/csi.v1.Controller/ControllerGetCapabilities',
          ),
        {
          timeoutMs: 60_000,
          intervalMs: 250,
          describe: async () => (await provisioner?.tail()) ?? '',
        },
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }
  log(
    `CSI driver ${driverName} on node ${o.nodeName}: ${driverSocket}, registration ${registrationSocket}`,
  );

  const calls = async (): Promise<CsiCall[]> =>
    parseCalls(await readFile(driverLog, 'utf8').catch(() => ''));
  return {
    driverName,
    nodeId,
    storageClassName,
    driverSocket,
    registrationSocket,
    dir,
    driver: () => driver,
    registrar: () => registrar,
    provisioner,
    attacher,
    calls,
    async waitForCall(what, match, options) {
      await waitFor(`CSI call ${what}`, async () => (await calls()).some(match), {
        timeoutMs: options?.timeoutMs ?? 60_000,
        intervalMs: 200,
        describe: async () =>
          `calls so far: ${(await calls()).map((c) => `${c.method}${c.error === '' ? '' : ` (${c.error})`}`).join(', ')}`,
      });
      const found = (await calls()).find(match);
      if (found === undefined) throw new Error(`CSI call ${what}: seen, then gone from the log`);
      return found;
    },
    async stopDriver(options) {
      const proc = driver;
      if (proc === undefined || !proc.alive()) return;
      if (options?.kill === true) process.kill(proc.pid, 'SIGKILL');
      await proc.stop(5000);
    },
    startDriver,
    async stopRegistrar() {
      await registrar?.stop(5000);
    },
    startRegistrar,
    async setFaults(faults) {
      // Written whole and renamed: the driver reads the file on every call.
      const tmp = `${faultsFile}.tmp`;
      await writeFile(tmp, JSON.stringify(faults));
      await rename(tmp, faultsFile);
    },
    stop,
  };
}
