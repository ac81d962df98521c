/**
 * oomScoreAdj: upstream's kubelet sets its own process's OOM score adjust (default
 * -999) so the kernel's OOM killer takes pods before the node agent. Lowering it needs
 * CAP_SYS_RESOURCE; without it the write fails, and berth, like upstream, logs and runs on.
 */
import { writeFile } from 'node:fs/promises';

/** Writes `value` to the process's oom_score_adj (upstream's ApplyOOMScoreAdj(0, value)). */
export async function applyOomScoreAdj(
  value: number,
  path = '/proc/self/oom_score_adj',
): Promise<void> {
  if (!Number.isInteger(value) || value < -1000 || value > 1000)
    throw new RangeError(`invalid oom_score_adj ${String(value)}: must be from -1000 to 1000`);
  await writeFile(path, String(value));
}
