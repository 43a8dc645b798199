/**
 * A cheap check, without a container engine, that the Dockerfile's build
 * stage copies every file `npm run build` reads (the tsconfig and Vite config
 * files its scripts name). scripts/verify-image.sh builds the image for real.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..', '..');

/** The sources of the `COPY <src...> <dest>` lines of the build stage (not `--from=`). */
function buildStageCopies(dockerfile: string): string[] {
  const stage = dockerfile.split(/^FROM /m)[1] ?? '';
  const copies: string[] = [];
  for (const line of stage.split('\n')) {
    const m = /^COPY\s+(?!--from)(.+)$/.exec(line.trim());
    if (m?.[1] !== undefined) copies.push(...m[1].split(/\s+/).slice(0, -1));
  }
  return copies;
}

/** The files that `npm run build` and the scripts it runs name with -p / --config. */
function filesBuildReads(scripts: Record<string, string>): string[] {
  const files: string[] = [];
  const visit = (name: string): void => {
    const text = scripts[name] ?? '';
    for (const m of text.matchAll(/(?:-p|--config)\s+(\S+)/g)) if (m[1]) files.push(m[1]);
    for (const m of text.matchAll(/npm run (\S+)/g)) if (m[1]) visit(m[1]);
  };
  visit('build');
  return files;
}

describe('Dockerfile build stage', () => {
  it('copies every file npm run build reads', () => {
    const copies = buildStageCopies(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    const read = filesBuildReads(pkg.scripts);
    assert.ok(read.includes('ui/tsconfig.json'), `found ${read.join(', ')}`);
    for (const file of read) {
      const copied = copies.some((c) => file === c || file.startsWith(`${c.replace(/\/$/, '')}/`));
      assert.ok(
        copied,
        `${file} is read by npm run build but not copied (COPY ${copies.join(' ')})`,
      );
    }
  });
});
