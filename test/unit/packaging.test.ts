/**
 * Cheap checks of how the package and the image are built, without npm's
 * registry or a container engine: the Dockerfile's build stage copies every
 * file `npm run build` reads (scripts/verify-image.sh builds the image for
 * real), and `npm pack` works in a fresh clone (its prepack script installs
 * the development dependencies the build needs when they are missing).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

describe('prepack', () => {
  /** The npm commands the prepack script runs in `dir`, with a stand-in npm that records them. */
  function prepackCommands(withNodeModules: boolean): string[] {
    const dir = mkdtempSync(join(tmpdir(), 'dtp-prepack-'));
    try {
      mkdirSync(join(dir, 'bin'));
      writeFileSync(join(dir, 'bin', 'npm'), `#!/bin/sh\necho "$*" >> "${dir}/npm.log"\n`);
      chmodSync(join(dir, 'bin', 'npm'), 0o755);
      if (withNodeModules) mkdirSync(join(dir, 'node_modules'));
      const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>;
      };
      const script = pkg.scripts.prepack ?? '';
      const env = { ...process.env, PATH: `${join(dir, 'bin')}:${process.env.PATH ?? ''}` };
      const r = spawnSync('sh', ['-c', script], { cwd: dir, env, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return readFileSync(join(dir, 'npm.log'), 'utf8').trim().split('\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('installs the dependencies first in a fresh clone, then builds', () => {
    assert.deepEqual(prepackCommands(false), ['ci --no-audit --no-fund', 'run build:package']);
  });

  it('only builds where the dependencies are installed', () => {
    assert.deepEqual(prepackCommands(true), ['run build:package']);
  });
});
