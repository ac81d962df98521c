/**
 * The UserNamespaceManager contract: the manager on disk (over a temporary root
 * directory) and the in-memory fake both pass it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from 'kubernetes-types/core/v1.js';
import { cri } from '../cri/index.ts';
import type { KubeletMappings, UserNamespaceManager } from './types.ts';

export interface UsernsSetup {
  /** The runtime's handlers and their user namespace support. */
  readonly handlers: Readonly<Record<string, boolean>>;
  readonly mappings?: KubeletMappings;
  readonly maxPods?: number;
}

export interface UsernsSubject {
  readonly manager: UserNamespaceManager;
  /** Removes the pod's directory, as the volume clean-up does for a gone pod. */
  removePodDir(uid: string): Promise<void>;
}

function pod(uid: string, hostUsers?: boolean): Pod {
  return {
    metadata: { name: `p-${uid}`, namespace: 'default', uid },
    spec: { containers: [{ name: 'c' }], ...(hostUsers !== undefined && { hostUsers }) },
  };
}

const signal = new AbortController().signal;

export function userNamespaceManagerContract(
  name: string,
  make: (setup: UsernsSetup) => Promise<UsernsSubject>,
): void {
  describe(`UserNamespaceManager contract: ${name}`, () => {
    test('hostUsers unset or true: the node user namespace, no range taken', async () => {
      const { manager } = await make({ handlers: { '': false } });
      for (const hostUsers of [undefined, true]) {
        const ns = await manager.getOrCreateUserNamespaceMappings(pod('a', hostUsers), '', signal);
        assert.deepEqual(ns, { mode: cri.NamespaceMode.NODE, uids: [], gids: [] });
      }
      assert.equal(manager.allocated('a'), undefined);
    });

    test('hostUsers false: a pod range of 65536 IDs from root, the same on every call', async () => {
      const { manager } = await make({ handlers: { '': true } });
      const first = await manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal);
      assert.equal(first.mode, cri.NamespaceMode.POD);
      assert.equal(first.uids.length, 1);
      const [m] = first.uids;
      assert.ok(m !== undefined);
      assert.equal(m.containerId, 0);
      assert.equal(m.length, 65536);
      assert.ok(m.hostId >= 65536 && m.hostId % 65536 === 0, `hostId ${m.hostId}`);
      assert.deepEqual(first.gids, first.uids);
      assert.equal(manager.allocated('a'), m.hostId);
      const again = await manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal);
      assert.deepEqual(again, first);
    });

    test('two pods get disjoint ranges', async () => {
      const { manager } = await make({ handlers: { '': true } });
      const a = await manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal);
      const b = await manager.getOrCreateUserNamespaceMappings(pod('b', false), '', signal);
      assert.notEqual(a.uids[0]?.hostId, b.uids[0]?.hostId);
    });

    test('a handler without support, or one the runtime does not list, is refused in upstream words', async () => {
      const { manager } = await make({ handlers: { '': false, 'runc-userns': true, kata: false } });
      await assert.rejects(manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal), {
        code: 'BERTH_USERNS',
        message: "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
      });
      await assert.rejects(
        manager.getOrCreateUserNamespaceMappings(pod('a', false), 'kata', signal),
        {
          message:
            'can\'t set `spec.hostUsers: false`, RuntimeClass handler "kata" does not support user namespaces',
        },
      );
      await assert.rejects(
        manager.getOrCreateUserNamespaceMappings(pod('a', false), 'gvisor', signal),
        {
          message:
            'can\'t set `spec.hostUsers: false`, RuntimeClass handler "gvisor" does not support user namespaces: the handler "gvisor" is not known',
        },
      );
      assert.equal(manager.allocated('a'), undefined);
      const ok = await manager.getOrCreateUserNamespaceMappings(
        pod('a', false),
        'runc-userns',
        signal,
      );
      assert.equal(ok.mode, cri.NamespaceMode.POD);
    });

    test('a runtime that lists no handlers supports none', async () => {
      const { manager } = await make({ handlers: {} });
      await assert.rejects(manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal), {
        message: "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
      });
    });

    test('when every range is taken the next pod is refused; release frees one', async () => {
      const { manager } = await make({
        handlers: { '': true },
        mappings: { firstId: 65536, length: 65536 },
        maxPods: 1,
      });
      const a = await manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal);
      assert.equal(a.uids[0]?.hostId, 65536);
      await assert.rejects(manager.getOrCreateUserNamespaceMappings(pod('b', false), '', signal), {
        message: 'create user namespace: could not find an empty slot to allocate a user namespace',
      });
      await manager.release('a');
      assert.equal(manager.allocated('a'), undefined);
      const b = await manager.getOrCreateUserNamespaceMappings(pod('b', false), '', signal);
      assert.equal(b.uids[0]?.hostId, 65536);
    });

    test('kubelet IDs too few for maxPods fail each hostUsers false pod, not the others', async () => {
      const { manager } = await make({
        handlers: { '': true },
        mappings: { firstId: 65536, length: 65536 },
        maxPods: 110,
      });
      await assert.rejects(manager.getOrCreateUserNamespaceMappings(pod('a', false), '', signal), {
        message: /kubelet user assigned IDs are not enough to support 110 pods/,
      });
      const node = await manager.getOrCreateUserNamespaceMappings(pod('b'), '', signal);
      assert.equal(node.mode, cri.NamespaceMode.NODE);
    });

    test('orphan clean-up frees the ranges of unknown pods and of pods whose directory is gone', async () => {
      const subject = await make({ handlers: { '': true } });
      const { manager } = subject;
      for (const uid of ['a', 'b', 'c'])
        await manager.getOrCreateUserNamespaceMappings(pod(uid, false), '', signal);
      await subject.removePodDir('c');
      await manager.cleanupOrphanedPodUsernsAllocations(new Set(['b', 'c']), signal);
      assert.equal(manager.allocated('a'), undefined, 'a is not active');
      assert.notEqual(manager.allocated('b'), undefined, 'b is active and on disk');
      assert.equal(manager.allocated('c'), undefined, "c's directory is gone");
    });
  });
}
