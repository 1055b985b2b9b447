import { readFileSync } from 'node:fs';

/**
 * True when a process with this pid exists and has not exited. `kill(pid, 0)` alone also succeeds
 * for a zombie: a process that has exited (e.g. just SIGKILLed) but whose parent has not reaped it
 * yet, which can last as long as the parent lives. On Linux such a process is read as dead from
 * /proc/<pid>/stat (state Z or X); elsewhere kill(pid, 0) decides. EPERM: it exists but belongs to
 * someone else, so alive.
 */
export function pidAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false; // 0 and negatives name process groups
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return !exited(pid);
}

function exited(pid: number): boolean {
  if (process.platform !== 'linux') return false;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return false; // no /proc here (or not readable): kill(pid, 0) said it exists
  }
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const state = stat.charAt(stat.lastIndexOf(')') + 2);
  return state === 'Z' || state === 'X';
}
