/** The header of the sandbox's admin token (GET /__sandbox/tasks and /__sandbox/stats need it, also from loopback). */
export const ADMIN_HEADER = 'x-sandbox-admin-token';

/** fetch() options carrying a sandbox's admin token. */
export function admin(sb: { adminToken: string }): RequestInit {
  return { headers: { [ADMIN_HEADER]: sb.adminToken } };
}

/** The admin token `genbatch sandbox` printed at start, or null (not printed yet, or chosen: "(as given)"). */
export function printedAdminToken(stdout: string): string | null {
  const m = /^admin token \(.*\): (\S+)$/m.exec(stdout);
  return m?.[1] && m[1] !== '(as' ? m[1] : null;
}

/** A task as the sandbox's admin listing shows it. */
export interface ListedTask {
  task_id: string;
  state: string;
  callback_url: string | null;
  callback_delivered: boolean;
}

/** Every task the sandbox holds (GET /__sandbox/tasks). */
export async function sandboxTasks(sb: { url: string; adminToken: string }): Promise<ListedTask[]> {
  return ((await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: ListedTask[] }).tasks;
}
