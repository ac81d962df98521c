/** A ContainerLogManager for other managers' tests: records calls, touches no file. */
import type { ContainerLogManager } from './types.ts';

export class FakeContainerLogManager implements ContainerLogManager {
  readonly cleaned: string[] = [];
  rotations = 0;

  async run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    await new Promise<void>((resolve) => {
      signal.addEventListener(
        'abort',
        () => {
          resolve();
        },
        { once: true },
      );
    });
  }

  rotateLogs(): Promise<void> {
    this.rotations++;
    return Promise.resolve();
  }

  clean(containerId: string): Promise<void> {
    this.cleaned.push(containerId);
    return Promise.resolve();
  }
}
