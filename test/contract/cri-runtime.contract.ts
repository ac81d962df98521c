/**
 * The CRI runtime contract: what berth relies on from a container runtime, run against
 * every implementation of CriClient berth has — containerd 2.x and 1.6 through the gRPC
 * client (test/e2e/cri-client.test.ts) and the fake runtime (src/cri/fake). A fake that
 * passes it can stand in for containerd in unit tests.
 *
 * Where the runtimes legitimately differ, the contract states what berth may rely on
 * (e.g. stopping an unknown container succeeds or is NotFound) and `hasEvents` selects
 * the branch for the RPCs 1.6 lacks. The commands run in containers, and what busybox
 * does with them, are in cri-programs.ts.
 */
import { after, before, describe } from 'node:test';
import type { CriClient, cri } from '../../src/cri/index.ts';
import { containerContract } from './cri-containers.contract.ts';
import { imageContract } from './cri-images.contract.ts';
import { lifecycleContract } from './cri-lifecycle.contract.ts';
import { runtimeContract } from './cri-runtime-info.contract.ts';
import { sandboxContract } from './cri-sandboxes.contract.ts';

/** One runtime under test, as its set-up provides it. */
export interface CriRuntimeUnderTest {
  readonly client: CriClient;
  readonly images: {
    /** A busybox image in a registry that requires `credentials`. */
    readonly busybox: string;
  };
  readonly credentials: { readonly username: string; readonly password: string };
  /** A fresh sandbox config (new uid) whose logDirectory may be created by the test. */
  readonly podConfig: (name: string) => cri.PodSandboxConfig;
  /** A reference in the same registry that does not exist. */
  readonly missingImage: string;
  /** The subnet pod IPs come from, a.b.c.d/N. */
  readonly podSubnet: string;
  /** The runtime has GetContainerEvents and RuntimeConfig (containerd >= 1.7). */
  readonly hasEvents: boolean;
  /** The content of a container's log file, `relPath` relative to the sandbox's logDirectory. */
  readonly readLog: (config: cri.PodSandboxConfig, relPath: string) => Promise<string>;
  /** Closes the client and removes all the set-up made. */
  readonly teardown: () => Promise<void>;
}

/** Gives the contract's test groups the runtime once `before` has set it up. */
export type RuntimeRef = () => CriRuntimeUnderTest;

/** Registers the whole contract as one suite named `name`, run against what `setup` makes. */
export function criRuntimeContract(name: string, setup: () => Promise<CriRuntimeUnderTest>): void {
  describe(name, () => {
    let runtime: CriRuntimeUnderTest | undefined;
    const ref: RuntimeRef = () => {
      if (runtime === undefined)
        throw new Error(`Cannot run the CRI contract: ${name} did not set up`);
      return runtime;
    };

    before(async () => {
      runtime = await setup();
    });

    after(async () => {
      await runtime?.teardown();
    });

    runtimeContract(ref);
    imageContract(ref);
    sandboxContract(ref);
    lifecycleContract(ref);
    containerContract(ref);
  });
}
