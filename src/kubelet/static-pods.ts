/**
 * Static pod wiring of the composition root: the file and URL sources feeding the pod
 * config, the mirror pod manager, manifest problems as Warning events on the Node, and
 * the rule that two pods of one full name never run side by side (upstream's pod
 * workers hold a static pod back while another of its name is still terminating: a
 * changed manifest is a new UID, and the old pod's containers must be gone before the
 * new pod starts, e.g. so a port is free).
 */
import type { Pod } from 'kubernetes-types/core/v1.js';
import type { EventRecorder } from '../events/types.ts';
import type { KubeClient } from '../kube/types.ts';
import { MirrorPodManager } from '../mirror/manager.ts';
import { MirrorClient } from '../mirror/mirror-client.ts';
import { PodConfig, type PodSourceName } from '../podsource/config.ts';
import { FileSource } from '../podsource/file-source.ts';
import { HttpSource } from '../podsource/http-source.ts';
import type { PodSourceConsumer } from '../podsource/types.ts';
import { podFullName } from '../podsource/static-pod.ts';
import type { PodWorkers } from '../podworkers/pod-workers.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/logger.ts';

export interface StaticPodOptions {
  /** staticPodPath: a directory of manifests or one manifest. */
  readonly staticPodPath?: string;
  readonly fileCheckFrequencyMs?: number;
  readonly staticPodURL?: string;
  readonly staticPodURLHeader?: Readonly<Record<string, readonly string[]>>;
  readonly httpCheckFrequencyMs?: number;
  /**
   * False in standalone mode: no API source to wait for before orphans may be killed,
   * and no mirror pods.
   */
  readonly api?: boolean;
}

export interface StaticPodDeps {
  readonly nodeName: string;
  readonly kube: KubeClient;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly podWorkers: () => PodWorkers;
  readonly nodeUID: () => string | undefined;
  readonly apiSynced: () => boolean;
  /** Where pods go once they may start (admission, then the pod workers). */
  readonly consumer: PodSourceConsumer;
  /** A static pod's mirror was made: its status may be written now. */
  readonly onMirror: (uid: string) => void;
  /**
   * A removed static pod has stopped: forget its status. (An API pod's status goes
   * with its API object; a static pod has none to delete.)
   */
  readonly forget: (uid: string) => void;
}

export class StaticPods {
  readonly config: PodConfig;
  readonly mirrors: MirrorPodManager;
  readonly #file: FileSource | undefined;
  readonly #http: HttpSource | undefined;
  readonly #d: StaticPodDeps;
  readonly #api: boolean;
  /** Full name -> UID of the static pod handed to the pod workers under that name. */
  readonly #started = new Map<string, string>();

  constructor(options: StaticPodOptions, deps: StaticPodDeps) {
    this.#d = deps;
    const { nodeName, clock, logger, recorder } = deps;
    const log = logger.child({ component: 'static-pods' });
    this.#api = options.api ?? true;
    const sources: PodSourceName[] = this.#api ? ['api'] : [];
    if (options.staticPodPath) sources.push('file');
    if (options.staticPodURL) sources.push('http');
    this.config = new PodConfig({
      sources,
      clock,
      logger: log,
      apiSynced: deps.apiSynced,
      consumer: {
        add: (pod) => {
          this.#add(pod);
        },
        update: (pod) => {
          deps.consumer.update(pod);
        },
        remove: (pod) => {
          deps.consumer.remove(pod);
          const uid = pod.metadata?.uid ?? '';
          const source = pod.metadata?.annotations?.['kubernetes.io/config.source'];
          if (source === undefined || source === 'api') return;
          void deps
            .podWorkers()
            .waitForgotten(uid)
            .then(() => {
              // The same manifest back meanwhile is the same UID: keep its status then.
              if (!this.config.pods().has(uid)) deps.forget(uid);
            });
        },
      },
      onMirrorChange: () => {
        this.mirrors.kick();
      },
    });
    const nodeTarget = { kind: 'Node', name: nodeName, uid: nodeName } as const;
    const onProblem = (where: string, message: string): void => {
      recorder.event(
        nodeTarget,
        'Warning',
        'FailedValidation',
        message.includes(where) ? message : `${where}: ${message}`,
      );
    };
    this.#file = options.staticPodPath
      ? new FileSource({
          path: options.staticPodPath,
          nodeName,
          clock,
          logger: log,
          periodMs: options.fileCheckFrequencyMs ?? 20_000,
          onUpdate: (pods) => {
            this.config.set('file', pods);
            this.mirrors.kick();
          },
          onProblem,
        })
      : undefined;
    this.#http = options.staticPodURL
      ? new HttpSource({
          url: options.staticPodURL,
          headers: options.staticPodURLHeader ?? {},
          nodeName,
          clock,
          logger: log,
          periodMs: options.httpCheckFrequencyMs ?? 20_000,
          onUpdate: (pods) => {
            this.config.set('http', pods);
            this.mirrors.kick();
          },
          onProblem,
        })
      : undefined;
    this.mirrors = new MirrorPodManager({
      client: new MirrorClient({ client: deps.kube, nodeName, nodeUID: deps.nodeUID, logger: log }),
      pods: this.config,
      clock,
      logger: log,
      syncing: (uid) => deps.podWorkers().state(uid) === 'syncing',
      onMirror: deps.onMirror,
    });
  }

  /** The loops: each source, and the mirror pods. */
  loops(): [string, (signal: AbortSignal) => Promise<void>][] {
    const out: [string, (signal: AbortSignal) => Promise<void>][] = [];
    const file = this.#file;
    const http = this.#http;
    if (file !== undefined) out.push(['static-pod-file', (s) => file.run(s)]);
    if (http !== undefined) out.push(['static-pod-url', (s) => http.run(s)]);
    // Always with an API: mirrors left by a staticPodPath since unconfigured are
    // orphans to delete.
    if (this.#api) out.push(['mirror-pods', (s) => this.mirrors.run(s)]);
    return out;
  }

  /** A new pod: a static pod waits for any other pod of its full name to be gone. */
  #add(pod: Pod): void {
    const source = pod.metadata?.annotations?.['kubernetes.io/config.source'];
    if (source === undefined || source === 'api') {
      this.#d.consumer.add(pod);
      return;
    }
    const name = podFullName(pod);
    const uid = pod.metadata?.uid ?? '';
    const previous = this.#started.get(name);
    this.#started.set(name, uid);
    const workers = this.#d.podWorkers();
    if (previous === undefined || previous === uid || workers.state(previous) === undefined) {
      this.#d.consumer.add(pod);
      this.mirrors.kick();
      return;
    }
    this.#d.logger.info('Static pod waits for the previous pod of its name to stop', {
      pod: name,
      podUID: uid,
      previousUID: previous,
    });
    void workers.waitForgotten(previous).then(() => {
      // Still wanted, and still the newest of its name?
      if (this.#started.get(name) !== uid || !this.config.pods().has(uid)) return;
      this.#d.consumer.add(this.config.pods().get(uid) ?? pod);
      this.mirrors.kick();
    });
  }
}
