/**
 * The client of a standalone kubelet (no --kubeconfig): there is no API server, so
 * every request fails at once with a typed error instead of trying the network.
 * Upstream's standalone kubelet has a nil client; the managers that would call it are
 * not started, and what is left (a static pod naming a Secret or a ConfigMap) fails
 * as it would upstream, with a clear message.
 */
import { BerthError } from '../util/errors.ts';
import type { KubeClient, ListResult, WatchEvent } from './types.ts';

export class NoApiServerError extends BerthError {
  constructor(what: string) {
    super(
      'BERTH_KUBE_NO_API_SERVER',
      `Cannot ${what}: berth runs standalone (no --kubeconfig), there is no API server`,
    );
  }
}

export class NoApiClient implements KubeClient {
  get<T>(): Promise<T> {
    return Promise.reject(new NoApiServerError('get an object'));
  }
  list<T>(): Promise<ListResult<T>> {
    return Promise.reject(new NoApiServerError('list objects'));
  }
  create<T>(): Promise<T> {
    return Promise.reject(new NoApiServerError('create an object'));
  }
  update<T>(): Promise<T> {
    return Promise.reject(new NoApiServerError('update an object'));
  }
  patch<T>(): Promise<T> {
    return Promise.reject(new NoApiServerError('patch an object'));
  }
  delete(): Promise<void> {
    return Promise.reject(new NoApiServerError('delete an object'));
  }
  watch<T>(): AsyncIterable<WatchEvent<T>> {
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.reject(new NoApiServerError('watch objects')),
      }),
    };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
