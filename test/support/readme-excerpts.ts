import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

/*
 * The README's code snippets kept equal to the examples they come from: an example marks the
 * lines the README shows with `// [readme:<topic>]` and `// [/readme:<topic>]`.
 */

const repo = fileURLToPath(new URL('../../', import.meta.url));

/** The lines between `[readme:<topic>]` and `[/readme:<topic>]` in `file` (from the repo's root), dedented. */
export function excerpt(file: string, topic: string): string {
  const lines = readFileSync(join(repo, file), 'utf8').split('\n');
  const start = lines.findIndex((line) => line.trim() === `// [readme:${topic}]`);
  const end = lines.findIndex((line) => line.trim() === `// [/readme:${topic}]`);
  expect(start, `${file} marks its README excerpt`).toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(start + 1);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((line) => line.trim()).map((line) => /^\s*/.exec(line)![0].length));
  return body.map((line) => line.slice(indent)).join('\n');
}

/** The bodies of the README's code blocks fenced as `fence` in the section `## heading` (or `### heading`). */
export function readmeBlocks(heading: string, fence: string): string[] {
  const readme = readFileSync(join(repo, 'README.md'), 'utf8');
  const level = /^#+/.exec(heading)?.[0] ?? '##';
  const title = heading.replace(/^#+\s*/, '');
  const from = readme.indexOf(`\n${level} ${title}\n`);
  expect(from, `README.md has a section "${level} ${title}"`).toBeGreaterThanOrEqual(0);
  const next = readme.slice(from + 1).search(new RegExp(`\\n#{1,${level.length}} `));
  const section = readme.slice(from, next === -1 ? undefined : from + 1 + next);
  return [...section.matchAll(new RegExp(`^\`\`\`${fence}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((m) => m[1]!);
}
