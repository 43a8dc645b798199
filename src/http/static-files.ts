/**
 * The dashboard's page shell and assets, built by Vite into `dist/ui/` at
 * `npm run build` and served from memory (the whole folder is a few hundred
 * KiB, read once). Nothing is fetched from elsewhere: the page works offline.
 * The shell holds no job data; it asks the API (and, with client tokens, asks
 * for a token first), so it is served without authorization.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sendText } from './responses.js';

/** Where `npm run build` puts the assets, relative to this compiled file (dist/src/http/). */
export const DEFAULT_UI_DIR = fileURLToPath(new URL('../../ui/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
};

/** Only our own origin: no inline script, no remote anything. */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>dtp</title>
<p>The dashboard's assets are not built. Run <code>npm run build</code> and restart the coordinator.</p>`;

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

export class StaticFiles {
  readonly #assets = new Map<string, Asset>();

  /** Reads every file of `dir` (once); a missing folder serves a note instead of the page. */
  constructor(dir: string = DEFAULT_UI_DIR) {
    if (existsSync(dir)) this.#load(dir, '');
  }

  #load(dir: string, prefix: string): void {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        this.#load(path, `${prefix}/${name}`);
        continue;
      }
      const body = readFileSync(path);
      const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
      const type = TYPES[extname(name)] ?? 'application/octet-stream';
      this.#assets.set(`${prefix}/${name}`, { body, type, etag });
    }
  }

  /** True when the assets were found. */
  get built(): boolean {
    return this.#assets.has('/index.html');
  }

  /** Serves `/` (the shell) and `/assets/*`; false for any other path. */
  serve(path: string, req: IncomingMessage, res: ServerResponse): boolean {
    const file = path === '/' ? '/index.html' : path;
    if (file !== '/index.html' && !file.startsWith('/assets/') && file !== '/favicon.svg') {
      return false;
    }
    const asset = this.#assets.get(file);
    if (asset === undefined) {
      if (file !== '/index.html') return false;
      sendText(res, 200, NOT_BUILT, TYPES['.html'], {
        'Content-Security-Policy': CONTENT_SECURITY_POLICY,
      });
      return true;
    }
    // Vite names assets by content hash: they never change under one name.
    const cache = file.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
    const headers = {
      ETag: asset.etag,
      'Cache-Control': cache,
      'Content-Security-Policy': CONTENT_SECURITY_POLICY,
    };
    if (req.headers['if-none-match'] === asset.etag) {
      res.writeHead(304, headers);
      res.end();
      return true;
    }
    sendText(res, 200, asset.body, asset.type, headers);
    return true;
  }
}
