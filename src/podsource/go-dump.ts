/**
 * The text upstream's kubelet hashes for a static pod's UID: Go's go-spew, configured as
 * k8s.io/utils/dump.ForHash, printing the internal `core.Pod` the manifest decodes to
 * (`%#v`: every field with its Go type, nil pointers and collections as `<nil>`, map
 * keys sorted). The kubelet hashes this in-memory value, not the manifest's bytes, so
 * the same pod written in YAML or JSON, in any key order, gets the same UID; berth
 * reproduces it from the v1 JSON pod (after the API defaults) and the table of Go types
 * in go-pod-types.ts, generated from k8s.io/kubernetes by reflection.
 *
 * Spew's rules reproduced here (format.go): a value is prefixed with `(<type>)` unless
 * it is an element of a slice or map; a non-nil pointer prints `(*T)` then the value;
 * structs print `{Field:value ...}` with every field in declaration order; slices
 * `[a b]`; maps `map[k:v ...]` in key order; strings raw; numbers in decimal.
 */
import { GO_POD_TYPES } from './go-pod-types.ts';
import { parseGoQuantity, roundUpGoQuantity, type GoQuantity } from './go-quantity.ts';

interface GoType {
  readonly kind: string;
  readonly elem?: string;
  readonly key?: string;
  /** Go name, v1 JSON name ('' when not settable from v1, '^' when embedded), type. */
  readonly fields?: readonly (readonly [string, string, string])[];
}

const cache = new Map<string, GoType>();

function goType(name: string): GoType {
  const hit = cache.get(name);
  if (hit !== undefined) return hit;
  const spec = GO_POD_TYPES[name];
  if (spec === undefined) throw new Error(`Cannot hash a static pod: no Go type ${name}`);
  const [kind = '', ...rest] = spec.split(';');
  let t: GoType;
  if (kind === 'ptr' || kind === 'slice') t = { kind, elem: rest[0] ?? '' };
  else if (kind === 'map') t = { kind, key: rest[0] ?? '', elem: rest[1] ?? '' };
  else if (kind === 'struct')
    t = {
      kind,
      fields: rest.map((f) => {
        const [goName = '', json = '', type = ''] = f.split(',');
        return [goName, json, type] as const;
      }),
    };
  else t = { kind };
  cache.set(name, t);
  return t;
}

type Value = unknown;

function isObject(v: Value): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Values whose Go form is not a field-by-field copy of their JSON: a quantity is
 * parsed (and rounded up to milli units, as the API's ResourceList defaulting does), an
 * int-or-string becomes its tagged struct, a timestamp or TypeMeta is the zero value
 * the decoder leaves. The result is keyed by Go field names.
 */
function goShaped(type: string, v: Value, inResourceList: boolean): Value {
  switch (type) {
    case 'resource.Quantity': {
      if (typeof v !== 'string' && typeof v !== 'number') return undefined;
      const q: GoQuantity = parseGoQuantity(v);
      return inResourceList ? roundUpGoQuantity(q, -3) : q;
    }
    case 'intstr.IntOrString':
      return typeof v === 'number'
        ? { Type: 0, IntVal: v, StrVal: '' }
        : { Type: 1, IntVal: 0, StrVal: typeof v === 'string' ? v : '' };
    case 'v1.Time':
    case 'v1.TypeMeta':
      return undefined;
    default:
      return v;
  }
}

const SPECIAL = new Set(['resource.Quantity', 'intstr.IntOrString', 'v1.Time', 'v1.TypeMeta']);

class Printer {
  readonly out: string[] = [];

  print(type: string, v: Value, ignoreType: boolean, byGoName: boolean, inList = false): void {
    const t = goType(type);
    if (t.kind === 'ptr') {
      const elem = t.elem ?? '';
      if (v === undefined || v === null) {
        this.out.push(ignoreType ? '<nil>' : `(${type})<nil>`);
        return;
      }
      this.out.push(ignoreType ? '<*>' : `(${type})`);
      this.print(elem, v, true, byGoName, inList);
      return;
    }
    if (!ignoreType) this.out.push(`(${type})`);
    let value = v;
    let goNames = byGoName;
    if (SPECIAL.has(type) && !byGoName) {
      value = goShaped(type, v, inList);
      goNames = true;
    }
    switch (t.kind) {
      case 'slice': {
        if (!Array.isArray(value)) {
          this.out.push('<nil>');
          return;
        }
        this.out.push('[');
        value.forEach((e: Value, i) => {
          if (i > 0) this.out.push(' ');
          this.print(t.elem ?? '', e, true, goNames);
        });
        this.out.push(']');
        return;
      }
      case 'map': {
        if (!isObject(value)) {
          this.out.push('<nil>');
          return;
        }
        const resourceList = type === 'core.ResourceList';
        this.out.push('map[');
        Object.keys(value)
          .sort()
          .forEach((k, i) => {
            if (i > 0) this.out.push(' ');
            this.print(t.key ?? '', k, true, goNames);
            this.out.push(':');
            this.print(t.elem ?? '', value[k], true, goNames, resourceList);
          });
        this.out.push(']');
        return;
      }
      case 'struct': {
        const obj = isObject(value) ? value : {};
        this.out.push('{');
        (t.fields ?? []).forEach(([goName, json, ftype], i) => {
          if (i > 0) this.out.push(' ');
          this.out.push(`${goName}:`);
          // '^': an embedded struct, whose fields sit beside the parent's in JSON.
          const fv = goNames
            ? obj[goName]
            : json === '^'
              ? obj
              : json === ''
                ? undefined
                : obj[json];
          this.print(ftype, fv, false, goNames);
        });
        this.out.push('}');
        return;
      }
      case 'string':
        this.out.push(typeof value === 'string' ? value : '');
        return;
      case 'bool':
        this.out.push(value === true ? 'true' : 'false');
        return;
      default:
        // Every integer kind: spew prints strconv's decimal form.
        this.out.push(typeof value === 'number' || typeof value === 'bigint' ? String(value) : '0');
    }
  }
}

/**
 * dump.ForHash of the internal Go pod that `pod` (a v1 pod in JSON form, with the API
 * defaults applied, before the kubelet's own name/UID/annotation changes) decodes to.
 */
export function goDumpForHash(pod: Readonly<Record<string, unknown>>): string {
  const p = new Printer();
  p.print('*core.Pod', pod, false, false);
  return p.out.join('');
}
