// Runs the genbatch CLI in this process and prints its resource usage as one
// JSON line on fd 3 (or stderr): {"exit", "user_s", "sys_s", "max_rss_mb", "wall_s", "start_ms"}
// (start_ms: when wall_s starts, epoch ms).
// Usage: node bench/run.measure.mjs <genbatch args...>
import { writeSync } from 'node:fs';
process.env.GENBATCH_NO_EXIT = '1';
const t0 = performance.now();
process.argv = [process.argv[0], 'genbatch', ...process.argv.slice(2)];
process.on('exit', (code) => {
  const u = process.resourceUsage();
  const line = JSON.stringify({ exit: code, user_s: u.userCPUTime / 1e6, sys_s: u.systemCPUTime / 1e6, max_rss_mb: u.maxRSS / 1024, wall_s: (performance.now() - t0) / 1000, start_ms: performance.timeOrigin + t0 });
  try {
    writeSync(3, line + '\n');
  } catch {
    writeSync(2, line + '\n');
  }
});
// What users run: bin/genbatch.js (the bundled CLI when it is built and fresh).
await import('../bin/genbatch.js');
