/**
 * Figures of one fault scenario run: printed as one line (FAULTS-FIGURES {json}) and,
 * when FAULTS_OUT names a directory, written there as <scenario>.json, the source of
 * RELIABILITY.md's tables.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export type Figures = Readonly<Record<string, string | number | boolean | readonly number[]>>;

export async function recordFigures(scenario: string, figures: Figures): Promise<void> {
  const entry = { scenario, at: new Date().toISOString(), ...figures };
  console.log(`FAULTS-FIGURES ${JSON.stringify(entry)}`);
  const dir = process.env['FAULTS_OUT'];
  if (dir === undefined || dir === '') return;
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, `${scenario}.json`), `${JSON.stringify(entry, null, 2)}\n`);
}

/** A size from the environment (FAULTS_<NAME>), or the default sized for 2 cores. */
export function sizeFlag(name: string, fallback: number): number {
  const raw = process.env[`FAULTS_${name}`];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`Cannot use FAULTS_${name}=${raw}: expected a non-negative integer`);
  return n;
}
