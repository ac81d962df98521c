/**
 * What every KmsgSource must do, run against the fake and /dev/kmsg: records come back
 * whole in kmsg's "prio,seq,usec,flags;text" shape, a drained log answers at once with
 * nothing (the watcher polls; a read must never wait for the kernel), close is idempotent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseKmsgRecord } from './parser.ts';
import type { KmsgSource } from './types.ts';

export interface KmsgContractSubject {
  readonly source: KmsgSource;
  /** Makes at least one new record appear (the fake pushes one; the real log has them). */
  readonly produce: () => void;
}

export function kmsgSourceContract(name: string, make: () => Promise<KmsgContractSubject>): void {
  test(`${name}: records are whole kmsg records, in sequence order`, async () => {
    const { source, produce } = await make();
    try {
      produce();
      const records = await source.read(new AbortController().signal);
      assert.ok(records.length > 0, 'at least one record');
      const parsed = records.map((r) => parseKmsgRecord(r, 0));
      for (let i = 1; i < parsed.length; i++) {
        assert.ok((parsed[i]?.sequence ?? 0) > (parsed[i - 1]?.sequence ?? 0), 'sequence grows');
      }
    } finally {
      await source.close();
    }
  });

  test(`${name}: a drained log answers at once with nothing`, async () => {
    const { source, produce } = await make();
    try {
      produce();
      const signal = new AbortController().signal;
      await source.read(signal);
      // Records may arrive meanwhile on a live kernel: drain until a read is empty.
      let empty = false;
      for (let i = 0; i < 100 && !empty; i++) empty = (await source.read(signal)).length === 0;
      assert.ok(empty, 'an empty read after draining');
    } finally {
      await source.close();
      await source.close();
    }
  });
}
