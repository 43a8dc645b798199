/**
 * Headless Chromium for the dashboard's browser tests, driven by
 * playwright-core (no browser download: the system's Chromium, Debian's
 * `chromium` package). Each launch gets a fresh, empty profile folder,
 * removed on close, and the flags that keep Chromium off the network.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Where a Chromium may be; DTP_CHROMIUM overrides. */
const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The Chromium binary to use, or null when none is installed. */
export function findChromium(): string | null {
  const override = process.env.DTP_CHROMIUM;
  if (override !== undefined && override !== '') return existsSync(override) ? override : null;
  return CANDIDATES.find((path) => existsSync(path)) ?? null;
}

/** Why browser tests are skipped here, or false when they can run. */
export function browserSkipReason(): string | false {
  return findChromium() === null
    ? "no Chromium found (install Debian's chromium package, or set DTP_CHROMIUM); .ci/run installs it"
    : false;
}

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile and opens one page. */
export async function launchBrowser(viewport = { width: 1280, height: 860 }): Promise<TestBrowser> {
  const executablePath = findChromium();
  if (executablePath === null) throw new Error('no Chromium found');
  const profile = mkdtempSync(join(tmpdir(), 'dtp-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(10_000);
  return {
    context,
    page,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
