import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The fenced code blocks of README.md and docs/*.md, each with the mark that says how it is kept
 * true. The mark is an HTML comment on the last non-blank line before the block's fence:
 *
 *   <!-- example: examples/typescript/tour.ts#acquire; run by test/integration/docs-examples.test.ts -->
 *     The block is the text of an example file (the whole file, or the lines between
 *     `[docs:acquire]` and `[/docs:acquire]` comment lines in it, dedented), and the named test
 *     runs that example.
 *
 *   <!-- checked by scripts/check-go-install.sh: go-program -->
 *     The named test (or script) reads the block out of this file by its name and runs or checks
 *     it: a program it runs, commands it runs, output it compares.
 *
 * test/integration/docs-code-blocks.test.ts fails on a block without a mark, and on a mark that
 * does not hold.
 */

export const repo = fileURLToPath(new URL('../../', import.meta.url));

export type DocBlock = {
  /** The file, from the repository's root (`README.md`, `docs/go.md`). */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** What follows the opening backticks: `ts`, `console`, or empty. */
  lang: string;
  body: string;
  mark:
    | { kind: 'example'; path: string; region: string | undefined; runner: string }
    | { kind: 'checked'; runner: string; name: string | undefined }
    | { kind: 'none'; comment: string | undefined };
};

/** README.md and every Markdown file under docs/. */
export function docFiles(): string[] {
  const docs = readdirSync(join(repo, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

function parseMark(comment: string | undefined): DocBlock['mark'] {
  const example = comment && /^<!-- example: (\S+?)(?:#(\S+))?; run by (\S+) -->$/.exec(comment);
  if (example) return { kind: 'example', path: example[1]!, region: example[2], runner: example[3]! };
  const checked = comment && /^<!-- checked by (\S+?)(?:: (\S+))? -->$/.exec(comment);
  if (checked) return { kind: 'checked', runner: checked[1]!, name: checked[2] };
  return { kind: 'none', comment };
}

/** Every fenced block of `file` (from the repository's root), in order. */
export function docBlocks(file: string): DocBlock[] {
  const lines = readFileSync(join(repo, file), 'utf8').split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[1]!;
    const end = lines.findIndex((line, j) => j > i && line === fence);
    if (end === -1) throw new Error(`${file}:${i + 1}: a code block that is never closed`);
    let previous = i - 1;
    while (previous >= 0 && lines[previous]!.trim() === '') previous--;
    const comment =
      previous >= 0 && lines[previous]!.startsWith('<!--') ? lines[previous]!.trim() : undefined;
    blocks.push({
      file,
      line: i + 1,
      lang: open[2]!.trim(),
      body: lines.slice(i + 1, end).join('\n'),
      mark: parseMark(comment),
    });
    i = end;
  }
  return blocks;
}

/** The block of `file` marked `<!-- checked by <runner>: <name> -->`; throws unless there is exactly one. */
export function checkedBlock(file: string, name: string): string {
  const found = docBlocks(file).filter((block) => block.mark.kind === 'checked' && block.mark.name === name);
  if (found.length !== 1)
    throw new Error(`${file} has ${found.length} blocks marked "checked by ...: ${name}"`);
  return found[0]!.body;
}

/**
 * The text an `example:` mark stands for: the whole file without its final newline, or the lines
 * between `[docs:<region>]` and `[/docs:<region>]` (comment lines in the file's language), dedented.
 */
export function exampleText(path: string, region?: string): string {
  const text = readFileSync(join(repo, path), 'utf8');
  if (region === undefined) return text.replace(/\n$/, '');
  const lines = text.split('\n');
  const marker = (line: string, tag: string): boolean => [`// ${tag}`, `# ${tag}`].includes(line.trim());
  const start = lines.findIndex((line) => marker(line, `[docs:${region}]`));
  const end = lines.findIndex((line) => marker(line, `[/docs:${region}]`));
  if (start === -1 || end <= start + 1)
    throw new Error(`${path} has no region [docs:${region}] ... [/docs:${region}]`);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((line) => line.trim()).map((line) => /^\s*/.exec(line)![0].length));
  return body.map((line) => line.slice(indent)).join('\n');
}

/**
 * The commands of a ```console block: each `$ ` line (with `\` continuation lines joined), the
 * lines typed after it (for `-d @`: the lines that are one JSON object), and the output shown.
 */
export function consoleCommands(body: string): Array<{ command: string; typed: string[]; output: string[] }> {
  const commands: Array<{ command: string; typed: string[]; output: string[] }> = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('$ ')) {
      let command = line.slice(2);
      while (command.endsWith('\\') && i + 1 < lines.length)
        command = `${command.slice(0, -1)}${lines[++i]!.trim()}`;
      commands.push({ command: command.replace(/\s+#[^'"]*$/, '').trim(), typed: [], output: [] });
    } else if (commands.length > 0) {
      const current = commands.at(-1)!;
      if (/^\{".*\}$/.test(line)) current.typed.push(line);
      else current.output.push(line);
    }
  }
  return commands;
}
