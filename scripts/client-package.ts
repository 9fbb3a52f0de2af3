/*
 * @lockstream/client, the client-only npm package (packages/client): the SDK (src/client), the
 * fencing helpers (src/fencing) and what they import (src/common, src/gen), never the server.
 *
 *   node --import tsx scripts/client-package.ts build
 *     Compiles packages/client/dist with packages/client/tsconfig.json, whose `files` are the
 *     package's entry points: the compiler follows their imports, so the package holds exactly the
 *     modules they reach, in src/'s layout (dist/client, dist/common, dist/gen, dist/fencing), each
 *     with its .d.ts. Then checks the result (below) and that the package's version, and the range
 *     of each dependency, are the root package's. `npm pack` in packages/client runs this first
 *     (its prepack script), so the tarball is always built from the sources of the clone.
 *
 *   node --import tsx scripts/client-package.ts check DIR
 *     Checks a package directory, such as an installed node_modules/@lockstream/client: every
 *     export's files exist; every bare import of its .js and .d.ts files is a declared dependency
 *     (or peer dependency) or a Node.js built-in, and every dependency is imported; nothing of
 *     the server (no dist/server, no dist/cli).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const repo = fileURLToPath(new URL('../', import.meta.url));
const packageDir = join(repo, 'packages/client');

type PackageJson = {
  name: string;
  version: string;
  exports: Record<string, string | Record<string, string>>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
};

const readJson = (path: string): PackageJson => JSON.parse(readFileSync(path, 'utf8')) as PackageJson;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

/** The package a bare specifier names (`@grpc/grpc-js/build/x` -> `@grpc/grpc-js`), or undefined for a relative one. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/')) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const builtins = new Set(builtinModules);
const isBuiltin = (specifier: string): boolean =>
  specifier.startsWith('node:') || builtins.has(specifier.split('/')[0]!);

/** The problems of the package in `dir` (empty when it is sound), and the packages its files import. */
export function checkPackage(dir: string): { problems: string[]; imported: Map<string, string[]> } {
  const problems: string[] = [];
  const manifest = readJson(join(dir, 'package.json'));

  for (const [subpath, target] of Object.entries(manifest.exports)) {
    for (const file of typeof target === 'string' ? [target] : Object.values(target))
      if (!existsSync(join(dir, file))) problems.push(`export ${subpath}: ${file} is missing`);
  }
  for (const serverDir of ['dist/server', 'dist/cli', 'dist/cli.js'])
    if (existsSync(join(dir, serverDir))) problems.push(`${serverDir} is server code`);

  // Every bare import (static, dynamic, `import("x")` types, triple-slash types) -> the files importing it.
  const imported = new Map<string, string[]>();
  const note = (name: string, file: string): void => {
    imported.set(name, [...(imported.get(name) ?? []), relative(dir, file)]);
  };
  const files = filesUnder(join(dir, 'dist')).filter((file) => /\.(js|d\.ts)$/.test(file));
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of info.importedFiles) {
      if (isBuiltin(fileName)) continue;
      const name = packageOf(fileName);
      if (name !== undefined) note(name, file);
      else if (!existsSync(join(file, '..', fileName)))
        problems.push(`${relative(dir, file)} imports ${fileName}, which is not in the package`);
    }
    for (const { fileName } of info.typeReferenceDirectives)
      if (fileName !== 'node') note(`@types/${fileName}`, file);
  }
  const declared = new Set([
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
  ]);
  for (const [name, by] of imported)
    if (!declared.has(name))
      problems.push(
        `${name} is imported (by ${by.slice(0, 3).join(', ')}${by.length > 3 ? ` and ${by.length - 3} more` : ''}) ` +
          `but is not a dependency of ${manifest.name}`,
      );
  // A peer dependency may go unimported (pg: the PostgreSQL adapter takes the caller's client).
  for (const name of Object.keys(manifest.dependencies ?? {}))
    if (!imported.has(name))
      problems.push(`${name} is a dependency of ${manifest.name} that no file imports`);
  return { problems, imported };
}

function build(): void {
  rmSync(join(packageDir, 'dist'), { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(packageDir, 'tsconfig.json')], { stdio: 'inherit' });

  const { problems } = checkPackage(packageDir);
  const root = readJson(join(repo, 'package.json'));
  const client = readJson(join(packageDir, 'package.json'));
  if (client.version !== root.version)
    problems.push(`version ${client.version} is not the root package's ${root.version}`);
  const rootRanges = { ...root.peerDependencies, ...root.dependencies };
  for (const [name, range] of Object.entries({ ...client.dependencies, ...client.peerDependencies }))
    if (rootRanges[name] !== range)
      problems.push(`${name}@${range} is not the root package's range (${rootRanges[name] ?? 'absent'})`);
  problems.push(...entryPointProblems(client));
  report(problems, packageDir);
}

/**
 * The package's entry points are named three times: its exports, the `files` of its tsconfig
 * (what is compiled), and the root tsconfig's `paths` (how the examples and tests in the clone
 * import it). The three must agree.
 */
function entryPointProblems(client: PackageJson): string[] {
  const problems: string[] = [];
  type TsConfig = { files?: string[]; compilerOptions?: { paths?: Record<string, string[]> } };
  const tsconfig = (path: string): TsConfig => {
    const read = ts.readConfigFile(path, (file) => ts.sys.readFile(file));
    if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
    return read.config as TsConfig;
  };
  const compiled = new Set(tsconfig(join(packageDir, 'tsconfig.json')).files ?? []);
  const paths = tsconfig(join(repo, 'tsconfig.json')).compilerOptions?.paths ?? {};
  const entries = Object.entries(client.exports).filter(([subpath]) => subpath !== './package.json');
  for (const [subpath, target] of entries) {
    const js = typeof target === 'string' ? target : target['default'];
    const source = js && /^\.\/dist\/(.+)\.js$/.exec(js)?.[1];
    if (!source) {
      problems.push(`export ${subpath}: ${String(js)} is not a file under ./dist`);
      continue;
    }
    const specifier = `${client.name}${subpath.slice(1)}`;
    if (!compiled.has(`../../src/${source}.ts`))
      problems.push(
        `export ${subpath}: src/${source}.ts is not in the files of packages/client/tsconfig.json`,
      );
    if (paths[specifier]?.join() !== `./src/${source}.ts`)
      problems.push(`tsconfig.json: paths["${specifier}"] should be ["./src/${source}.ts"]`);
  }
  if (compiled.size !== entries.length)
    problems.push('packages/client/tsconfig.json compiles files that are no export of the package');
  const mapped = Object.keys(paths).filter((key) => key.startsWith(client.name));
  if (mapped.length !== entries.length)
    problems.push(`tsconfig.json maps ${client.name} subpaths that are no export of the package`);
  return problems;
}

function report(problems: string[], dir: string): void {
  if (problems.length === 0) return;
  for (const problem of problems) console.error(`${relative(process.cwd(), dir) || '.'}: ${problem}`);
  process.exit(1);
}

const [command, dir] = process.argv.slice(2);
if (command === 'build') build();
else if (command === 'check' && dir !== undefined) {
  const { problems, imported } = checkPackage(dir);
  report(problems, dir);
  console.log(`imports only its dependencies: ${[...imported.keys()].sort().join(', ')}`);
} else {
  console.error('usage: client-package.ts build | check DIR');
  process.exit(2);
}
