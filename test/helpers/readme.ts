/**
 * The code blocks of README.md, for tests that run what it shows as it is
 * written: shell blocks line by line, JavaScript and TypeScript blocks
 * written to the file their first line names (`// tasks.js`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CodeBlock {
  /** The fence's language: `sh`, `js`, `ts`, ... */
  lang: string;
  text: string;
  /** The file a first line `// <name>` names, else null. */
  file: string | null;
}

/** README.md's `## <heading>` section, up to the next `## ` heading. */
export function readmeSection(root: string, heading: string): string {
  const text = readFileSync(join(root, 'README.md'), 'utf8');
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README.md has no section "## ${heading}"`);
  const end = text.indexOf('\n## ', start + 4);
  return text.slice(start, end < 0 ? undefined : end);
}

/** The fenced code blocks of a piece of Markdown, in order. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  for (const m of markdown.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) {
    const text = m[2] ?? '';
    const file = /^\/\/ ([\w./-]+)\n/.exec(text)?.[1] ?? null;
    blocks.push({ lang: m[1] ?? '', text, file });
  }
  return blocks;
}

/** The commands of a shell block: its non-empty lines (comments after them kept). */
export function shellLines(block: CodeBlock): string[] {
  return block.text.split('\n').filter((line) => line.trim() !== '');
}
