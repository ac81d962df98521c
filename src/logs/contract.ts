/**
 * The ContainerLogManager contract: what the kubelet relies on when it starts the
 * rotation loop and cleans a removed container's logs. The CRI log manager (over the
 * fake CRI runtime and temp dirs, on the fake clock) and FakeContainerLogManager pass
 * it; both run it from contract.test.ts. Rotation itself (sizes, gzip, maxFiles) is the
 * real manager's own behaviour and stays in manager.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ContainerLogManager } from './types.ts';

export interface LogManagerContractSubject {
  readonly manager: ContainerLogManager;
  /** Removes whatever the subject left behind. */
  dispose(): Promise<void>;
}

const live = (): AbortSignal => new AbortController().signal;

export function containerLogManagerContract(
  name: string,
  make: () => Promise<LogManagerContractSubject>,
): void {
  describe(`ContainerLogManager contract: ${name}`, () => {
    test('run() with an aborted signal resolves at once', async () => {
      const s = await make();
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      await s.manager.run(ac.signal);
      await s.dispose();
    });

    test('run() resolves, never rejects, once its signal aborts', async () => {
      const s = await make();
      const ac = new AbortController();
      let settled = false;
      const running = s.manager.run(ac.signal).finally(() => {
        settled = true;
      });
      await new Promise((r) => setImmediate(r));
      assert.equal(settled, false, 'run() returned before its signal aborted');
      ac.abort(new Error('stop'));
      await running;
      await s.dispose();
    });

    test('a pass over no containers and cleaning an unknown container both succeed, repeatedly', async () => {
      const s = await make();
      await s.manager.rotateLogs(live());
      await s.manager.rotateLogs(live());
      await s.manager.clean('no-such-container', live());
      await s.manager.clean('no-such-container', live());
      await s.dispose();
    });
  });
}
