/**
 * REST paths and query strings of the Kubernetes API: the core group lives under
 * `/api/v1`, every other group under `/apis/<group>/<version>`; namespaced resources
 * add `/namespaces/<ns>`, then the resource, the name and a subresource.
 */
import { BerthError } from '../util/errors.ts';
import type { ResourcePath } from './types.ts';

/** The URL path of a collection (no name), an object, or an object's subresource. */
export function resourceUrlPath(path: ResourcePath, name?: string, subresource?: string): string {
  if (path.version === '' || path.resource === '') {
    throw new BerthError(
      'BERTH_KUBE_BAD_PATH',
      `Cannot build an API path as version and resource are required: current value is ${JSON.stringify(path)}`,
    );
  }
  if (subresource !== undefined && (name === undefined || name === '')) {
    throw new BerthError(
      'BERTH_KUBE_BAD_PATH',
      `Cannot address subresource "${subresource}" of ${path.resource} without an object name`,
    );
  }
  const parts = path.group === '' ? ['api', path.version] : ['apis', path.group, path.version];
  if (path.namespace !== undefined && path.namespace !== '') {
    parts.push('namespaces', path.namespace);
  }
  parts.push(path.resource);
  if (name !== undefined) {
    if (name === '') {
      throw new BerthError(
        'BERTH_KUBE_BAD_PATH',
        `Cannot address an object of ${path.resource} as its name is empty`,
      );
    }
    parts.push(name);
  }
  if (subresource !== undefined && subresource !== '') parts.push(subresource);
  return `/${parts.map((p) => encodeURIComponent(p)).join('/')}`;
}

/** A query parameter value; undefined leaves the parameter out. */
export type QueryValue = string | number | boolean | undefined;

/** `?a=1&b=x` from the defined entries, in the given order; '' when none. */
export function queryString(params: Readonly<Record<string, QueryValue>>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined) continue;
    search.append(key, String(value));
  }
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}
