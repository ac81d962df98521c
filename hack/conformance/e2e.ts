/**
 * Runs upstream's e2e.test: lists the specs a focus selects (a Ginkgo dry run, no
 * cluster needed) and runs a selection against a cluster with the Ginkgo CLI, which
 * spreads the specs over parallel processes.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir, pinnedVersions } from '../../test/harness/binaries.ts';
import { run } from '../../test/harness/exec.ts';
import { readGinkgoReport, specName } from './report.ts';

export interface E2eBinaries {
  readonly e2eTest: string;
  readonly ginkgo: string;
}

/** e2e.test and ginkgo from the build cache (hack/conformance/build-go.sh builds them). */
export function e2eBinaries(): E2eBinaries {
  const dir = join(cacheDir(), 'bin', `e2e-${pinnedVersions()['KUBERNETES_VERSION'] ?? ''}`);
  const e2eTest = join(dir, 'e2e.test');
  const ginkgo = join(dir, 'ginkgo');
  for (const f of [e2eTest, ginkgo]) {
    try {
      accessSync(f, constants.X_OK);
    } catch {
      throw new Error(`Cannot find ${f}: run hack/conformance/build-go.sh e2e`);
    }
  }
  return { e2eTest, ginkgo };
}

/** The full names of the specs `focus` selects, from a dry run's JSON report. */
export async function listSpecs(
  bin: E2eBinaries,
  focus: string,
  jsonFile: string,
): Promise<string[]> {
  await run(
    bin.e2eTest,
    [
      '--ginkgo.dry-run',
      `--ginkgo.focus=${focus}`,
      `--ginkgo.json-report=${jsonFile}`,
      '--ginkgo.no-color',
      // Flags the suite reads before any spec; a dry run contacts nothing.
      '--kubeconfig=/dev/null',
    ],
    { timeoutMs: 300_000, okCodes: [0, 1] },
  );
  // The report lists every spec of the suite; the ones the focus filtered out too.
  const match = new RegExp(focus);
  return (await readGinkgoReport(jsonFile)).map(specName).filter((name) => match.test(name));
}

export interface RunSpec {
  readonly focus: string;
  readonly procs: number;
  readonly jsonReport: string;
  readonly outDir: string;
  readonly reportDir: string;
  readonly kubeconfig: string;
  readonly repoList: string;
  readonly logFile: string;
}

/** Runs the selected specs with the Ginkgo CLI; resolves to its exit code. */
export function spawnLogged(
  bin: E2eBinaries,
  signal: AbortSignal,
  s: RunSpec,
): Promise<number | null> {
  const fd = openSync(s.logFile, 'a');
  try {
    const child = spawn(
      bin.ginkgo,
      [
        `--procs=${String(s.procs)}`,
        '--timeout=6h',
        '--no-color',
        `--focus=${s.focus}`,
        `--json-report=${s.jsonReport.slice(s.outDir.length + 1)}`,
        `--output-dir=${s.outDir}`,
        // A failing spec's progress report after 5 minutes stuck, for the log.
        '--poll-progress-after=300s',
        bin.e2eTest,
        '--',
        `--kubeconfig=${s.kubeconfig}`,
        '--provider=local',
        `--report-dir=${s.reportDir}`,
        // Every node is the node under test; no cloud, no log dump over SSH.
        '--disable-log-dump',
        '--allowed-not-ready-nodes=0',
        '--system-pods-startup-timeout=5m',
      ],
      {
        stdio: ['ignore', fd, fd],
        env: { ...process.env, KUBE_TEST_REPO_LIST: s.repoList },
        // Its own process group: an interrupt goes to Ginkgo and its parallel processes
        // alike (as a terminal's ^C would; Ginkgo does not pass it on), which then stop,
        // clean up and write the reports.
        detached: true,
      },
    );
    const interrupt = (): void => {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGINT');
        } catch {
          // Already gone.
        }
      }
    };
    signal.addEventListener('abort', interrupt, { once: true });
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => {
        signal.removeEventListener('abort', interrupt);
        resolve(code);
      });
    });
  } finally {
    closeSync(fd);
  }
}
