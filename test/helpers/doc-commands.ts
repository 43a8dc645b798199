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
 *
 * Commands shown inline in running text are read too (`inline: true`): a code
 * span of a paragraph, list item or table cell (it may run over a line break,
 * read as a blank) whose first word, after any `NAME=value` settings, is a
 * program we ship or document (see INLINE_PROGRAM) and that has at least one
 * argument, or settings or a `time` before it (`time scripts/verify-image.sh`). A bare name (`scripts/worker.sh`, `npm`) is a mention, not a
 * command; headings are titles, not commands.
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
  /** Shown in a code span of running text, not in a block. */
  inline: boolean;
}

/**
 * The programs whose code spans are commands: npm, npx, node, Python and pip,
 * curl, sqlite3, psql, the container engines, the installed `dtp*` programs,
 * any `*.sh` script (`scripts/client.sh`, or `client.sh` for short, as the
 * documents write it), CI's `.ci/run` and the tools of a virtual environment
 * (`.venv/bin/…`).
 */
export const INLINE_PROGRAM =
  /^(npm|npx|node|python3?|pip3?|curl|sqlite3|psql|docker|docker-compose|podman|podman-compose|dtp(-[a-z]+)?|\S*\.sh|\.ci\/run|\S*\.venv\/bin\/\S+)$/;

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
export interface RawLine {
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
  let paragraph: RawLine[] = [];
  const emit = (lines: RawLine[], template: boolean): void => {
    for (const command of joinLines(lines))
      out.push({ doc, heading, template, inline: false, ...command });
  };
  const endParagraph = (): void => {
    for (const span of inlineCommands(paragraph))
      out.push({ doc, heading, template: false, inline: true, comment: null, ...span });
    paragraph = [];
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
      endParagraph();
      return;
    }
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)(.*)$/.exec(text);
    const codeLine =
      /^ {4}/.test(text) && (indented !== null || startsCode(lines, index, lastText));
    if (indented !== null && !codeLine) {
      emit(indented, false);
      indented = null;
    }
    if (codeLine || open !== null || LIST_ITEM.test(text) || /^\s*(\||#{1,6}\s)/.test(text))
      endParagraph();
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
    else paragraph.push({ line, text });
    // A table row is a paragraph of its own.
    if (/^\s*\|/.test(text)) endParagraph();
    lastText = { indent: indentOf(text), listItem: LIST_ITEM.test(text) };
  });
  if (indented !== null) emit(indented, false);
  endParagraph();
  return out;
}

/**
 * The code spans of a paragraph that are commands: a run of backticks up to
 * the next run of the same length, a line break inside read as a blank, one
 * blank either side dropped when both are there.
 */
export function inlineCommands(paragraph: RawLine[]): RawLine[] {
  const first = paragraph[0];
  if (first === undefined) return [];
  const text = paragraph.map((l) => l.text).join('\n');
  const out: RawLine[] = [];
  const ticks = /`+/g;
  let open: RegExpExecArray | null;
  while ((open = ticks.exec(text)) !== null) {
    const start = open.index + open[0].length;
    let close = ticks.exec(text);
    while (close !== null && close[0].length !== open[0].length) close = ticks.exec(text);
    if (close === null) {
      ticks.lastIndex = start;
      continue;
    }
    let span = text.slice(start, close.index).replace(/\n/g, ' ');
    if (/^ .*\S.* $/.test(span)) span = span.slice(1, -1);
    const line = first.line + (text.slice(0, open.index).match(/\n/g)?.length ?? 0);
    if (isInlineCommand(span)) out.push({ line, text: span.trim().replace(/\s+/g, ' ') });
  }
  return out;
}

/**
 * A span is a command when it starts with a program of INLINE_PROGRAM and
 * gives it an argument, or has `NAME=value` settings or a `time` before it.
 */
export function isInlineCommand(span: string): boolean {
  const shown = span.trim();
  const rest = shown.replace(/^([A-Z_][A-Z0-9_]*=("[^"]*"|'[^']*'|\S*)\s+)*/, '');
  const words = rest.split(/\s+/);
  const program = words[0] === 'time' ? words[1] : words[0];
  return INLINE_PROGRAM.test(program ?? '') && (words.length >= 2 || rest !== shown);
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
function joinLines(
  lines: RawLine[],
): Omit<DocCommand, 'doc' | 'heading' | 'template' | 'inline'>[] {
  const out: Omit<DocCommand, 'doc' | 'heading' | 'template' | 'inline'>[] = [];
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
