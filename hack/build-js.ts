// Writes berth's runtime as plain JavaScript under .build/ for bin/berth.
//
// Why: Node 24 runs .ts by stripping types with a WebAssembly build of amaro, which
// stays resident in every berth process. Measured on this machine, loading berth's
// module graph costs 134 MiB of RSS as .ts and 99 MiB as pre-stripped .js; a node
// agent pays that on every node for as long as it runs.
//
// How: starting at src/cmd/berth.ts, every relative import is followed; each file is
// stripped with Node's own stripTypeScriptTypes (the same transform Node applies at
// run time, so behaviour cannot differ) in "strip" mode, which blanks types with
// whitespace and so keeps every line and column: stack traces point at the .ts source
// unchanged. Import specifiers ending in .ts become .js, same length, found with
// TypeScript's parser rather than a regular expression so string literals that
// merely look like paths are left alone. The tree is written beside the final one and
// renamed into place, so a reader never sees half a build; .build/STAMP marks it
// complete, and bin/berth runs it only if no .ts file under src/ is newer than STAMP.
//
// Usage: node hack/build-js.ts   (hack/deps.sh runs it, so `make test` and `make demo` do)

import { stripTypeScriptTypes } from 'node:module';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const root = resolve(import.meta.dirname, '..');
const entry = join(root, 'src/cmd/berth.ts');
const out = join(root, '.build');

/** Every module specifier in a file: import and export declarations and import() calls. */
function moduleSpecifiers(file: string, source: string): ts.StringLiteral[] {
  const found: ts.StringLiteral[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined
    ) {
      if (ts.isStringLiteral(node.moduleSpecifier)) found.push(node.moduleSpecifier);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      // A computed import() cannot be rewritten; berth has none, and the build says so if one appears.
      if (arg === undefined || !ts.isStringLiteral(arg))
        throw new Error(`${relative(root, file)}: import() of a computed specifier`);
      found.push(arg);
    }
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS));
  return found;
}

/** Strips one file and rewrites its relative .ts imports; returns the code and the files it imports. */
function transform(file: string, source: string): { code: string; imports: string[] } {
  const stripped = stripTypeScriptTypes(source, { mode: 'strip' });
  if (stripped.length !== source.length) {
    // strip mode promises equal offsets; the specifier positions below rely on it.
    throw new Error(
      `${relative(root, file)}: stripping changed the length (${source.length} -> ${stripped.length})`,
    );
  }
  const imports: string[] = [];
  const edits: number[] = [];
  for (const literal of moduleSpecifiers(file, source)) {
    const spec = literal.text;
    if (!spec.startsWith('./') && !spec.startsWith('../')) continue;
    if (!spec.endsWith('.ts'))
      throw new Error(`${relative(root, file)}: relative import without .ts: ${spec}`);
    const at = literal.getStart() + 1; // past the opening quote
    const kept = stripped.slice(at, at + spec.length);
    // An `import type` is blanked whole: nothing to load, nothing to follow.
    if (kept.trim() === '') continue;
    if (kept !== spec)
      throw new Error(`${relative(root, file)}: import ${spec} changed by stripping`);
    imports.push(resolve(dirname(file), spec));
    edits.push(at + spec.length - 2);
  }
  if (edits.length === 0) return { code: stripped, imports };
  // Same-length edits, so the other offsets stay valid.
  let code = stripped;
  for (const at of edits) code = code.slice(0, at) + 'js' + code.slice(at + 2);
  return { code, imports };
}

async function main(): Promise<void> {
  const tmp = `${out}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  const seen = new Set<string>([entry]);
  const queue = [entry];
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    const { code, imports } = transform(file, await readFile(file, 'utf8'));
    const target = join(tmp, relative(root, file)).replace(/\.ts$/, '.js');
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, code);
    for (const dep of imports) {
      if (seen.has(dep)) continue;
      seen.add(dep);
      queue.push(dep);
    }
  }
  await writeFile(join(tmp, 'STAMP'), `${new Date().toISOString()} ${seen.size} files\n`);
  await rm(out, { recursive: true, force: true });
  await rename(tmp, out);
  process.stdout.write(`build-js: ${seen.size} files -> ${relative(root, out)}/\n`);
}

await main();
