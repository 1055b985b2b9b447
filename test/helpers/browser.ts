import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { describe, it } from 'vitest';
import { CHROMIUM } from './chromium.js';

/** Debian's Chromium (./chromium.ts says which binary), driven by playwright-core. */
export { CHROMIUM };
export const haveChromium = CHROMIUM !== null && existsSync(CHROMIUM);
const WANTED = CHROMIUM ?? '/usr/bin/chromium-headless-shell or /usr/bin/chromium';

/**
 * A describe() for tests in a real browser: without Chromium they are skipped, with a line saying so;
 * with CI=true a missing Chromium is a failure instead.
 */
export function describeBrowser(name: string, fn: () => void): void {
  if (haveChromium) {
    describe(name, fn);
    return;
  }
  if (process.env.CI === 'true') {
    describe(name, () => {
      it('has Chromium to run in', () => {
        throw new Error(`CI=true and no Chromium at ${WANTED}: the browser tests cannot run (install the chromium-headless-shell package)`);
      });
    });
    return;
  }
  process.stdout.write(`browser tests skipped (${name}): no Chromium at ${WANTED}; install the chromium-headless-shell package to run them\n`);
  describe.skip(name, fn);
}

/** Chromium headless; `hosts`: names resolved to 127.0.0.1 (to send another Host header, as DNS rebinding would). */
export function launchChromium(hosts: readonly string[] = []): Promise<Browser> {
  const args = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'];
  if (hosts.length > 0) args.push(`--host-resolver-rules=${hosts.map((h) => `MAP ${h} 127.0.0.1`).join(',')}`);
  return chromium.launch({ executablePath: CHROMIUM!, args });
}

/** Every console error and uncaught page error of `page`, as they come, pushed to `errors`. */
export function consoleErrors(page: Page, errors: string[] = []): string[] {
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  return errors;
}
