/**
 * Reads Ginkgo's JSON reports of e2e.test and writes the conformance report: every
 * selected spec with its result for each node agent, its duration and, for a failure,
 * the assertion message; a spec that fails for berth and for the upstream kubelet alike
 * is marked environmental.
 */
import { readFile, writeFile } from 'node:fs/promises';

/** The parts of a Ginkgo v2 SpecReport this reads. */
interface GinkgoSpecReport {
  readonly ContainerHierarchyTexts?: readonly string[] | null;
  readonly LeafNodeText?: string;
  readonly LeafNodeType?: string;
  readonly State?: string;
  readonly RunTime?: number;
  readonly Failure?: {
    readonly Message?: string;
    readonly Location?: { readonly FileName?: string; readonly LineNumber?: number };
  };
}

interface GinkgoSuiteReport {
  readonly SpecReports?: readonly GinkgoSpecReport[] | null;
}

export type Outcome = 'passed' | 'failed' | 'skipped' | 'not-run';

export interface SpecResult {
  readonly outcome: Outcome;
  readonly seconds: number;
  /** The assertion message (failed) or the skip reason (skipped). */
  readonly message?: string;
  readonly location?: string;
}

export interface SpecRow {
  readonly name: string;
  /** Set when the selection skipped it (test/conformance/skips.yaml). */
  readonly skipReason?: string;
  readonly results: Readonly<Record<string, SpecResult>>;
  /** Failed for every agent that ran it (more than one): the environment's, not berth's. */
  readonly environmental: boolean;
}

export function specName(r: GinkgoSpecReport): string {
  return [...(r.ContainerHierarchyTexts ?? []), r.LeafNodeText ?? ''].join(' ');
}

/** The It specs of a Ginkgo JSON report (suite set-up nodes are left out). */
export async function readGinkgoReport(file: string): Promise<GinkgoSpecReport[]> {
  const suites = JSON.parse(await readFile(file, 'utf8')) as GinkgoSuiteReport[];
  return suites.flatMap((s) => (s.SpecReports ?? []).filter((r) => r.LeafNodeType === 'It'));
}

/** The results of one agent's run, by spec name. */
export async function agentResults(file: string): Promise<Map<string, SpecResult>> {
  const out = new Map<string, SpecResult>();
  for (const r of await readGinkgoReport(file)) {
    const state = r.State ?? 'unknown';
    const skipMessage = r.Failure?.Message ?? '';
    // A spec the suite skipped itself says why; one an interrupt skipped, or cut short,
    // did not run.
    const outcome: Outcome =
      state === 'passed'
        ? 'passed'
        : state === 'skipped' || state === 'pending'
          ? skipMessage !== ''
            ? 'skipped'
            : 'not-run'
          : state === 'interrupted'
            ? 'not-run'
            : 'failed';
    const loc = r.Failure?.Location;
    out.set(specName(r), {
      outcome,
      seconds: Math.round((r.RunTime ?? 0) / 1e7) / 100,
      ...(outcome !== 'passed' &&
        r.Failure?.Message !== undefined && {
          message: outcome === 'failed' ? `[${state}] ${r.Failure.Message}` : r.Failure.Message,
        }),
      ...(loc?.FileName !== undefined && {
        location: `${loc.FileName.replace(/^.*k8s\.io\/kubernetes@[^/]+\//, '')}:${String(loc.LineNumber ?? 0)}`,
      }),
    });
  }
  return out;
}

export interface Report {
  readonly date: string;
  readonly kubernetesVersion: string;
  readonly command: string;
  readonly agents: readonly string[];
  readonly selected: number;
  readonly outOfScope: number;
  readonly rows: readonly SpecRow[];
  /** Agents whose run did not happen or did not finish, with why. */
  readonly notRun: Readonly<Record<string, string>>;
}

export function buildRows(
  selected: readonly { name: string; skipReason?: string }[],
  results: Readonly<Record<string, Map<string, SpecResult>>>,
): SpecRow[] {
  const agents = Object.keys(results);
  return selected.map(({ name, skipReason }) => {
    const perAgent: Record<string, SpecResult> = {};
    for (const agent of agents) {
      perAgent[agent] =
        skipReason !== undefined
          ? { outcome: 'skipped', seconds: 0, message: skipReason }
          : (results[agent]?.get(name) ?? { outcome: 'not-run', seconds: 0 });
    }
    const ran = Object.values(perAgent).filter((r) => r.outcome !== 'not-run');
    return {
      name,
      ...(skipReason !== undefined && { skipReason }),
      results: perAgent,
      environmental: ran.length > 1 && ran.every((r) => r.outcome === 'failed'),
    };
  });
}

export interface Counts {
  readonly selected: number;
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly notRun: number;
}

export function counts(rows: readonly SpecRow[], agent: string): Counts {
  const of = (o: Outcome): number => rows.filter((r) => r.results[agent]?.outcome === o).length;
  return {
    selected: rows.length,
    passed: of('passed'),
    failed: of('failed'),
    skipped: of('skipped'),
    notRun: of('not-run'),
  };
}

function oneLine(text: string, max = 600): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

/** The summary table and the failures, as Markdown (also COMPATIBILITY.md's body). */
export function summaryMarkdown(report: Report): string {
  const lines: string[] = [];
  lines.push(`| | ${report.agents.join(' | ')} |`);
  lines.push(`|---|${report.agents.map(() => '---:').join('|')}|`);
  const c = report.agents.map((a) => counts(report.rows, a));
  for (const key of ['selected', 'passed', 'failed', 'skipped', 'notRun'] as const) {
    const label = key === 'notRun' ? 'not run' : key;
    lines.push(`| ${label} | ${c.map((x) => String(x[key])).join(' | ')} |`);
  }
  for (const [agent, why] of Object.entries(report.notRun)) lines.push('', `**${agent}**: ${why}`);
  const failures = report.rows.filter((r) =>
    report.agents.some((a) => r.results[a]?.outcome === 'failed'),
  );
  lines.push('', `### Failures (${String(failures.length)})`, '');
  if (failures.length === 0) lines.push('None.');
  for (const row of failures) {
    const who = report.agents.filter((a) => row.results[a]?.outcome === 'failed');
    lines.push(
      `- **${row.name}** — fails on ${who.join(' and ')}${row.environmental ? ' (environmental: fails for every agent)' : ''}`,
    );
    for (const a of who) {
      const r = row.results[a];
      lines.push(`  - ${a} (${r?.location ?? '?'}): ${oneLine(r?.message ?? '')}`);
    }
  }
  return lines.join('\n');
}

export async function writeReport(report: Report, mdFile: string, jsonFile: string): Promise<void> {
  await writeFile(jsonFile, JSON.stringify(report, null, 2) + '\n');
  const lines = [
    `# Conformance run ${report.date}`,
    '',
    `Upstream e2e suite ${report.kubernetesVersion}; ${String(report.selected)} specs selected (${String(report.outOfScope)} matched the focus but are not node-facing). Command: \`${report.command}\``,
    '',
    summaryMarkdown(report),
    '',
    '## Every spec',
    '',
    `| spec | ${report.agents.map((a) => `${a} | s`).join(' | ')} |`,
    `|---|${report.agents.map(() => '---|---:').join('|')}|`,
  ];
  for (const row of report.rows) {
    const cols = report.agents.map((a) => {
      const r = row.results[a];
      const outcome = r?.outcome ?? 'not-run';
      const note = outcome === 'skipped' && r?.message !== undefined ? ` (${r.message})` : '';
      return `${cell(outcome + note)} | ${String(r?.seconds ?? 0)}`;
    });
    lines.push(`| ${cell(row.name)} | ${cols.join(' | ')} |`);
  }
  await writeFile(mdFile, lines.join('\n') + '\n');
}
