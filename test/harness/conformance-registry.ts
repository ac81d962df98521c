/**
 * The conformance images in a test cluster: an open registry (TLS, no authentication:
 * the suite's pods carry no pull secrets) on 127.0.0.1 holding them, containerd told
 * to fetch CONFORMANCE_REGISTRY's names from it (a hosts.toml mirror entry, so the
 * name itself is never resolved), and every image preloaded under all its names, so
 * pods start without a pull while specs that pull with policy Always still can.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  buildConformanceImages,
  CONFORMANCE_REGISTRY,
  type ConformanceImage,
} from '../../hack/images/conformance.ts';
import type { Cluster } from './cluster.ts';
import { importImage } from './containerd.ts';
import { run } from './exec.ts';
import { fetchLocal, freePort } from './net.ts';
import { ComponentProcess, waitFor } from './process.ts';
import { pushImage } from './registry.ts';

export interface ConformanceRegistry {
  /** 127.0.0.1:<port> */
  readonly host: string;
  readonly images: readonly ConformanceImage[];
  readonly process: ComponentProcess;
}

/** Starts the open registry, pushes and preloads every conformance image. */
export async function startConformanceRegistry(
  cluster: Cluster,
  log: (m: string) => void = () => undefined,
): Promise<ConformanceRegistry> {
  const images = await buildConformanceImages();
  const dir = join(cluster.root, 'conformance-registry');
  await mkdir(join(dir, 'data'), { recursive: true });
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  await writeFile(
    join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'data')}`,
      'http:',
      `  addr: ${host}`,
      `  secret: ${randomBytes(16).toString('hex')}`,
      '  tls:',
      `    certificate: ${cluster.pki.registry.cert}`,
      `    key: ${cluster.pki.registry.key}`,
      '',
    ].join('\n'),
  );
  const proc = ComponentProcess.start({
    name: 'conformance-registry',
    command: cluster.bin.registry,
    args: ['serve', join(dir, 'config.yml')],
    logFile: join(dir, 'registry.log'),
  });
  const ca = await readFile(cluster.pki.ca.cert);
  await waitFor(
    'the conformance registry to answer /v2/',
    async () => {
      if (!proc.alive()) throw new Error(`registry exited:\n${await proc.tail()}`);
      return (await fetchLocal(`https://${host}/v2/`, { ca, timeoutMs: 1000 })).status === 200;
    },
    { timeoutMs: 20_000, describe: () => proc.tail() },
  );
  const registry = {
    host,
    credentials: { username: 'anonymous', password: '' },
    caFile: cluster.pki.ca.cert,
    process: proc,
  };
  const prefix = `${CONFORMANCE_REGISTRY}/`;
  for (const image of images) {
    for (const ref of image.refs) await pushImage(registry, image.layout, ref.slice(prefix.length));
  }
  // containerd reads certs.d at every pull: the mirror applies without a restart.
  const certsD = join(cluster.root, 'containerd', 'certs.d', CONFORMANCE_REGISTRY);
  await mkdir(certsD, { recursive: true });
  await writeFile(
    join(certsD, 'hosts.toml'),
    [
      `server = "https://${host}"`,
      `ca = ${JSON.stringify(cluster.pki.ca.cert)}`,
      '',
      `[host."https://${host}"]`,
      '  capabilities = ["pull", "resolve"]',
      `  ca = ${JSON.stringify(cluster.pki.ca.cert)}`,
      '',
    ].join('\n'),
  );
  for (const image of images) {
    await importImage(cluster.runtime, image.archive);
    const [first, ...aliases] = image.refs;
    for (const alias of aliases) {
      await run(cluster.runtime.ctr, [
        '--address',
        cluster.runtime.socket,
        '--namespace',
        'k8s.io',
        'images',
        'tag',
        '--force',
        first ?? '',
        alias,
      ]);
    }
  }
  log(`conformance registry on ${host}: ${images.map((i) => i.refs.join(', ')).join('; ')}`);
  return { host, images, process: proc };
}
