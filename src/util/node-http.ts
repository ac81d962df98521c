/**
 * node:http's values, loaded through require rather than an ES import.
 *
 * Why: an ES import of a builtin builds a module namespace from every export, and
 * node:http's WebSocket, CloseEvent and MessageEvent are getters that load Node's
 * bundled undici and web streams. Berth uses none of them, yet a plain
 * `import { createServer } from 'node:http'` anywhere in the process made it resident:
 * a bare Node 24 measured 45.6 MiB of RSS after require('http') and 59.1 MiB after
 * `import 'node:http'`. Types still come from node:http with `import type`, which is
 * erased.
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';

const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const createServer: typeof Http.createServer = http.createServer;
export const request: typeof Http.request = http.request;
export const Agent: typeof Http.Agent = http.Agent;
