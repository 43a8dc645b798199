/**
 * The shell commands the documentation shows (README.md, python/README.md,
 * docs/*.md), read the way a reader would copy them:
 *
 * - every line of a fenced block whose language is `sh`, `bash` or `shell`
 *   (a block indented inside a list item too), and the `$ ` lines of any
 *   other fenced block (`console`);
 * - every line of an indented code block (four spaces, after a paragraph);
 * - lines ending in `\` joined with the next; blank lines and comment lines
 *   skipped; a trailing `# comment` kept apart from the command.
 *
 * A fence whose info string has the word `template` after the language
 * (```` ```sh template ````) marks commands that cannot run here (another
 * machine's engine, ...): they are listed, and counted as templates.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DocCommand {
  /** The document, relative to the repository root: `README.md`, `docs/HTTP.md`. */
  doc: string;
  /** 1-based line of the command's first line. */
  line: number;
  /** The nearest heading above it, without its `#`s. */
  heading: string;
  /** The command as shown, continuation lines joined, without a trailing comment. */
  text: string;
  /** Its trailing comment (without `#`), or null. */
  comment: string | null;
  /** Shown in a block marked `template`: not meant to run here. */
  template: boolean;
}

const SHELL_LANGUAGES = new Set(['sh', 'bash', 'shell']);
const LIST_ITEM = /^\s*([-*+]|\d+[.)])\s/;

/** The documents whose commands must run: README.md, python/README.md, docs/*.md. */
export function documentFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', 'python/README.md', ...docs];
}

/** Every command of every document, in document order. */
export function documentedCommands(root: string): DocCommand[] {
  return documentFiles(root).flatMap((doc) =>
    commandsIn(doc, readFileSync(join(root, doc), 'utf8')),
  );
}

/** A raw command line of a block: its text and where it starts. */
interface RawLine {
  line: number;
  text: string;
}

/** The last line of text outside code: how far it is indented, whether it opens a list item. */
interface Paragraph {
  indent: number;
  listItem: boolean;
}

interface Fence {
  marker: string;
  indent: number;
  shell: boolean;
  template: boolean;
  lines: RawLine[];
}

/** The commands of one Markdown document. */
export function commandsIn(doc: string, markdown: string): DocCommand[] {
  const out: DocCommand[] = [];
  let heading = '';
  let fence: Fence | null = null;
  let indented: RawLine[] | null = null;
  let lastText: Paragraph = { indent: 0, listItem: false };
  const emit = (lines: RawLine[], template: boolean): void => {
    for (const command of joinLines(lines)) out.push({ doc, heading, template, ...command });
  };
  const lines = markdown.split('\n');
  lines.forEach((text, index) => {
    const line = index + 1;
    if (fence !== null) {
      if (text.trim() === fence.marker) {
        const { lines: body, shell, template } = fence;
        emit(shell ? body : dollarLines(body), template);
        fence = null;
      } else fence.lines.push({ line, text: text.slice(Math.min(fence.indent, indentOf(text))) });
      return;
    }
    if (text.trim() === '') {
      indented?.push({ line, text: '' });
      return;
    }
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)(.*)$/.exec(text);
    const codeLine =
      /^ {4}/.test(text) && (indented !== null || startsCode(lines, index, lastText));
    if (indented !== null && !codeLine) {
      emit(indented, false);
      indented = null;
    }
    if (codeLine) {
      (indented ??= []).push({ line, text: text.slice(4) });
      return;
    }
    if (open !== null) {
      const words = (open[4] ?? '').trim().split(/\s+/);
      const lang = open[3] ?? '';
      fence = {
        marker: open[2] ?? '```',
        indent: (open[1] ?? '').length,
        shell: SHELL_LANGUAGES.has(lang),
        template: words.includes('template'),
        lines: [],
      };
      return;
    }
    const title = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (title !== null) heading = title[1] ?? '';
    lastText = { indent: indentOf(text), listItem: LIST_ITEM.test(text) };
  });
  if (indented !== null) emit(indented, false);
  return out;
}

/** An indented line opens a code block after a blank line that follows a plain paragraph. */
function startsCode(lines: string[], index: number, last: Paragraph): boolean {
  const previous = lines[index - 1];
  return previous !== undefined && previous.trim() === '' && last.indent === 0 && !last.listItem;
}

function indentOf(text: string): number {
  return text.length - text.trimStart().length;
}

/** The `$ ` lines of a block that is not a shell block, without their prompt. */
function dollarLines(lines: RawLine[]): RawLine[] {
  return lines.filter((l) => l.text.startsWith('$ ')).map((l) => ({ ...l, text: l.text.slice(2) }));
}

/** Shell lines to commands: continuations joined, blank and comment-only lines dropped. */
function joinLines(lines: RawLine[]): Omit<DocCommand, 'doc' | 'heading' | 'template'>[] {
  const out: Omit<DocCommand, 'doc' | 'heading' | 'template'>[] = [];
  let pending: RawLine | null = null;
  for (const raw of lines) {
    const joined: RawLine =
      pending === null ? raw : { line: pending.line, text: `${pending.text} ${raw.text.trim()}` };
    if (joined.text.endsWith('\\')) {
      pending = { line: joined.line, text: joined.text.slice(0, -1).trimEnd() };
      continue;
    }
    pending = null;
    const { command, comment } = splitComment(joined.text);
    if (command !== '') out.push({ line: joined.line, text: command, comment });
  }
  if (pending !== null) out.push({ line: pending.line, text: pending.text.trim(), comment: null });
  return out;
}

/** A shell line's command and its trailing comment: a `#` after a blank, outside quotes. */
export function splitComment(text: string): { command: string; comment: string | null } {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote !== null) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '\\') i++;
    else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] ?? ''))) {
      return { command: text.slice(0, i).trim(), comment: text.slice(i + 1).trim() };
    }
  }
  return { command: text.trim(), comment: null };
}
