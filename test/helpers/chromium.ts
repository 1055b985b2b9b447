import { existsSync } from 'node:fs';

/**
 * The Chromium the browser tests drive: GENBATCH_CHROMIUM when set, else Debian's `chromium-headless-shell`
 * (Chromium's own headless build: the same Blink and V8, without the desktop browser's window and compositor
 * machinery; it is what Playwright itself launches for headless Chromium), else Debian's `chromium`. null when
 * none is installed. The headless shell is the lighter of the two by far: test/view.browser.test.ts alone spent
 * 39.5 s of Chromium CPU (33 s wall) with `chromium` and 9.8 s (19 s wall) with the shell.
 */
export const CHROMIUM: string | null = process.env.GENBATCH_CHROMIUM ?? ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p)) ?? null;
