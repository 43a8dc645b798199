// A task module: checksums of files on the worker's machine, and word
// statistics of a text. Load it into a worker with
//
//   CHECKSUM_ROOT=/srv/files dtp-worker --tasks ./tasks.mjs
//
// (scripts/worker.sh in a checkout of dtp). Clients name files relative to
// CHECKSUM_ROOT (default: the worker's working directory); nothing outside
// it can be read.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { resolve, relative, isAbsolute, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { defineTask, defineTasks, NonRetryableError } from 'dtp/worker';
import { z } from 'zod';

const root = resolve(process.env.CHECKSUM_ROOT ?? '.');

/** The file under the root that `path` names; refuses anything outside it. */
function fileUnderRoot(path) {
  const full = resolve(root, path);
  const inside = relative(root, full);
  if (inside === '' || inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside)) {
    // Retrying cannot make this path acceptable: fail the job at once.
    throw new NonRetryableError(`${path} is outside the files this worker serves`);
  }
  return full;
}

export default defineTasks({
  /** `{ path, algorithm? }` -> `{ path, algorithm, bytes, digest }` (hex). */
  'files.checksum': defineTask({
    schema: z.object({
      path: z.string().min(1).max(4096),
      algorithm: z.enum(['sha256', 'sha512', 'sha1', 'md5']).default('sha256'),
    }),
    async run({ path, algorithm }, ctx) {
      const file = fileUnderRoot(path);
      const info = await stat(file).catch((err) => {
        if (err.code === 'ENOENT') throw new NonRetryableError(`no such file: ${path}`);
        throw err; // anything else (a busy disk...) may be worth a retry
      });
      if (!info.isFile()) throw new NonRetryableError(`not a regular file: ${path}`);
      ctx.log.info('hashing', { path, bytes: info.size, algorithm });
      const hash = createHash(algorithm);
      // The signal stops the read when the job is cancelled or its deadline passes.
      await pipeline(createReadStream(file), hash, { signal: ctx.signal });
      return { path, algorithm, bytes: info.size, digest: hash.digest('hex') };
    },
  }),

  /** A plain async function works too: `{ text }` -> counts. */
  'text.stats': async ({ text }) => {
    const words = String(text).split(/\s+/).filter(Boolean);
    return { characters: String(text).length, words: words.length };
  },
});
