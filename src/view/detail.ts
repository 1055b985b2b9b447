import { createHash } from 'node:crypto';
import { sanitizeName } from '../download/index.js';
import { CSS, escapeHtml, fileHref, formatBytes, promptOf, timeHtml, varsOf, varsText } from '../report/index.js';
import type { Store } from '../store/index.js';
import type { RunOutput } from './output.js';
import { localRefs } from './refs.js';

/**
 * GET /job/<id>: one job in full, as plain HTML (no script): what was asked (the input as sent, else as the
 * manifest gives it), its attempts (count, and every error recorded on it with its attempt and state), its mark and the
 * mark's history, its files with the size and sha256 the state file records, and each earlier attempt's regular
 * files (`previous-<n>/` in the job's folder, read through the output's Root: no link followed; sha256 as the
 * result.json kept there records it) side by side with the current ones. No file is hashed for the page.
 */
interface Shown {
  path: string;
  size: number;
  /** As recorded (the state file, a result.json kept in previous-<n>/, an object's metadata); null: none recorded. */
  sha256: string | null;
  type: string;
}

/**
 * The job page's one script (allowed by its hash): every <time> in the reader's time zone, as on the gallery,
 * and the Approve / Reject / Clear mark buttons (POST /api/marks from this page: the token in the HttpOnly
 * cookie, the Origin checked by the server), then the page is loaded again to show the mark.
 */
export const DETAIL_SCRIPT = `(() => {
"use strict";
for (const t of document.querySelectorAll("time[datetime]")) { const d = new Date(t.dateTime); if (!isNaN(d.getTime())) { t.title = t.dateTime; t.textContent = d.toLocaleString(); } }
const box = document.getElementById("gb-mark");
if (!box) return;
const say = document.getElementById("gb-mark-status");
for (const b of box.querySelectorAll("button[data-mark]")) b.addEventListener("click", async () => {
  const m = b.dataset.mark === "" ? null : b.dataset.mark;
  try {
    const res = await fetch("/api/marks", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ids: [box.dataset.id], mark: m, note: null }) });
    const body = await res.json();
    if (!res.ok) { say.textContent = "Not marked: " + (body.error || "HTTP " + res.status); return; }
    location.reload();
  } catch (e) { say.textContent = "Not marked: the view did not answer."; }
});
})();`;
const DETAIL_HASH = createHash('sha256').update(DETAIL_SCRIPT).digest('base64');

const IMAGE = /\.(png|jpe?g|webp|gif|avif|bmp)$/i;
const AUDIO = /\.(mp3|wav|ogg|m4a|aac|flac|opus)$/i;
const VIDEO = /\.(mp4|webm|mov|m4v)$/i;

function preview(f: Shown, alt: string): string {
  const href = fileHref(f.path);
  if (href === null) return '';
  const url = `/files/${href}`;
  if (f.type === 'image' || IMAGE.test(f.path)) return `<a href="${url}"><img src="${url}" alt="${escapeHtml(alt)}" loading="lazy"></a>`;
  if (f.type === 'audio' || AUDIO.test(f.path)) return `<figure class="player"><figcaption>${escapeHtml(f.path.split('/').pop()!)}</figcaption><audio controls preload="none" src="${url}"></audio></figure>`;
  if (f.type === 'video' || VIDEO.test(f.path)) return `<figure class="player"><figcaption>${escapeHtml(f.path.split('/').pop()!)}</figcaption><video controls preload="metadata" src="${url}"></video></figure>`;
  return '';
}

function filesHtml(title: string, files: readonly Shown[], alt: string): string {
  const rows = files
    .map((f) => {
      const href = fileHref(f.path);
      const name = href === null ? escapeHtml(f.path) : `<a href="/files/${href}">${escapeHtml(f.path)}</a>`;
      return `<tr><td class="tok">${name}</td><td class="n">${escapeHtml(formatBytes(f.size))}</td>${f.sha256 === null ? '<td class="note">not recorded</td>' : `<td class="tok">${escapeHtml(f.sha256)}</td>`}</tr>`;
    })
    .join('');
  const media = files.map((f) => preview(f, alt)).join('');
  return (
    `<section class="card"><h3>${escapeHtml(title)}</h3>` +
    (files.length === 0 ? '<p class="note">no files</p>' : `<div class="media">${media}</div><table><thead><tr><th>file</th><th>size</th><th>sha256</th></tr></thead><tbody>${rows}</tbody></table>`) +
    '</section>'
  );
}

function prettyJson(text: string | null): string {
  if (text === null) return '';
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** The page, or null when the run has no such job. `back`: the gallery's URL (with the token). */
export async function detailPage(store: Store, output: RunOutput, id: string, back: string): Promise<string | null> {
  const job = store.getJob(id);
  if (!job) return null;
  const files: Shown[] = store
    .filesOf(id)
    .filter((f) => f.state === 'done' && f.path !== null)
    .map((f) => ({ path: f.path!, size: f.size ?? 0, sha256: f.sha256, type: f.type }));
  const folder = files[0]?.path.split('/')[0] ?? sanitizeName(id, 'job');
  // result.json (the task's result as read, written by the run beside the files) is shown too, as in previous-<n>/.
  const kept = await output.info(`${folder}/result.json`);
  if (kept) files.push({ path: `${folder}/result.json`, size: kept.size, sha256: kept.sha256, type: 'json' });
  const sent = job.submitted_input;
  let specInput: string | null = null;
  try {
    specInput = JSON.stringify((JSON.parse(job.spec) as { input?: unknown }).input ?? null);
  } catch {
    specInput = null;
  }
  const inputText = sent ?? specInput;
  let input: Record<string, unknown> | null = null;
  try {
    input = JSON.parse(inputText ?? 'null') as Record<string, unknown> | null;
  } catch {
    input = null;
  }
  const prompt = promptOf(input);
  const vars = varsText(varsOf(job.where));
  const mark = store.markOf(id);
  const history = store.markHistory(id);
  const errors = store.jobErrors(id);
  const previous = (await output.previous(folder)).map((p) => ({ name: p.name, files: p.files.map((f): Shown => ({ ...f, type: '' })) }));
  const alt = (prompt ?? id).replace(/\s+/g, ' ').slice(0, 500);
  const refs = localRefs(job.spec, store.run().manifest);
  const done = job.state === 'done';
  const markButton = (label: string, value: string, cls: string) => `<button type="button" class="${cls}" data-mark="${value}"${done ? '' : ' disabled title="only done jobs can be marked"'}>${label}</button>`;
  const review =
    `<div class="review" id="gb-mark" data-id="${escapeHtml(id)}">${markButton('Approve', 'approved', 'gb-approve')}${markButton('Reject', 'rejected', 'gb-reject')}` +
    `${mark ? markButton('Clear mark', '', 'gb-clear') : ''}<span class="note" id="gb-mark-status" aria-live="polite"></span></div>`;
  const refsHtml =
    refs.length === 0
      ? ''
      : `<section class="card refs"><h3>reference images</h3><div class="media">${refs
          .map((r) => `<figure class="player"><a href="/ref/${encodeURIComponent(id)}/${r.n}"><img src="/ref/${encodeURIComponent(id)}/${r.n}" alt="${escapeHtml(`reference image ${r.name}`)}" loading="lazy"></a><figcaption class="tok">${escapeHtml(r.name)}</figcaption></figure>`)
          .join('')}</div></section>`;
  const dl = (k: string, v: string) => `<dt>${k}</dt><dd>${v}</dd>`;
  const parts: string[] = [
    `<p><a href="${escapeHtml(back)}">← all jobs</a></p>`,
    `<h1 class="tok">${escapeHtml(id)}</h1>`,
    '<dl class="summary">' +
      dl('State', `<span class="badge s-${escapeHtml(job.state)}">${escapeHtml(job.state)}</span>`) +
      dl('Model', escapeHtml(job.model)) +
      dl('Where', `<span class="tok">${escapeHtml(job.where)}</span>`) +
      dl('Task', job.task_id ? `<span class="tok">${escapeHtml(job.task_id)}</span>` : '<span class="note">none</span>') +
      dl('Attempts', String(job.attempts)) +
      (job.submitted_at ? dl('Submitted', timeHtml(job.submitted_at)) : '') +
      (job.finished_at ? dl('Finished', timeHtml(job.finished_at)) : '') +
      dl('Mark', mark ? `<span class="badge m-${escapeHtml(mark.state)}">${escapeHtml(mark.state)}</span>${mark.note ? ` ${escapeHtml(mark.note)}` : ''}` : '<span class="note">none</span>') +
      '</dl>',
    review,
  ];
  if (vars !== '') parts.push(`<p class="vars">${escapeHtml(vars)}</p>`);
  if (prompt) parts.push(`<h2>Prompt</h2><p class="prompt">${escapeHtml(prompt)}</p>`);
  parts.push(`<h2>Results</h2><div class="side">${refsHtml}${filesHtml('current', files, alt)}${previous.map((p) => filesHtml(p.name, p.files, alt)).join('')}</div>`);
  parts.push(`<h2>Input ${sent !== null ? 'as sent' : 'as the manifest gives it (not sent yet)'}</h2><pre>${escapeHtml(prettyJson(inputText))}</pre>`);
  if (sent !== null && specInput !== null && prettyJson(specInput) !== prettyJson(sent)) parts.push(`<details><summary>Input as the manifest gives it</summary><pre>${escapeHtml(prettyJson(specInput))}</pre></details>`);
  parts.push(
    `<h2>Attempts</h2><p>${job.attempts} attempt${job.attempts === 1 ? '' : 's'}${previous.length > 0 ? `; ${previous.length} earlier result${previous.length === 1 ? '' : 's'} kept in previous-&lt;n&gt;/` : ''}.</p>` +
      (errors.length > 0
        ? `<table class="errors"><thead><tr><th>attempt</th><th>state</th><th>at</th><th>error</th></tr></thead><tbody>${errors
            .map((e) => `<tr><td>${e.attempt}</td><td>${escapeHtml(e.state)}</td><td>${timeHtml(e.at)}</td><td><pre class="err">${escapeHtml(e.error)}</pre></td></tr>`)
            .join('')}</tbody></table>`
        : job.last_error
          ? `<p class="note">Last error:</p><pre class="err">${escapeHtml(job.last_error)}</pre>`
          : '<p class="note">No error recorded.</p>'),
  );
  if (history.length > 0) {
    const rows = history.map((h) => `<tr><td>${timeHtml(h.at)}</td><td>${h.mark === null ? 'cleared' : escapeHtml(h.mark)}</td><td>${escapeHtml(h.note ?? '')}</td></tr>`).join('');
    parts.push(`<h2>Mark history</h2><table><thead><tr><th>at</th><th>mark</th><th>note</th></tr></thead><tbody>${rows}</tbody></table>`);
  }
  return (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">' +
    `<meta http-equiv="Content-Security-Policy" content="script-src 'sha256-${DETAIL_HASH}'; object-src 'none'; base-uri 'none'; form-action 'none'">` +
    '<meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer">' +
    `<title>${escapeHtml(`genbatch view: ${id}`)}</title><style>${CSS}</style></head>\n<body>\n${parts.join('\n')}\n<script>${DETAIL_SCRIPT}</script>\n</body></html>\n`
  );
}
