/**
 * Resource quantities as numbers for the runtime configs. Parsing is the config
 * package's (one grammar for the whole of berth); this adds the CPU conversion.
 */
import { parseQuantity } from '../config/quantity.ts';

export { parseQuantity };

/** CPU quantity in millicores, rounded up as upstream does. */
export function milliCpu(q: string): number {
  return Math.ceil(parseQuantity(q) * 1000 - 1e-9);
}
