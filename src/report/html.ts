/**
 * report.html: a self-contained gallery (inline CSS, one small inline script
 * allowed by its hash, no external resource apart from the result files, linked
 * by relative path from the folder report.html is in: the output folder, or
 * another one given to `genbatch report --out`). Each card shows what the job
 * asked (its prompt, also the images' alt text, its rows/matrix variables and
 * its other input fields) beside the results: images shown, audio and video
 * playable, text results shown; failed/uncertain/expired jobs are listed with
 * their prompts and messages first. Times are written in ISO 8601 (UTC) inside
 * <time> elements; the script shows them in the reader's local time (without
 * it the ISO text stays).
 *
 * Everything that comes from the manifest or the service is HTML-escaped;
 * file paths are URL-encoded segment by segment, and a path that could leave
 * the output folder (absolute, "..", backslash) is shown but not linked.
 * One pass over the jobs with bounded memory: at most `galleryLimit` cards
 * and `problemLimit` problems are kept, the rest are counted in a note.
 */
import { createHash } from 'node:crypto';
import { relative, resolve, sep } from 'node:path';
import { varsText } from './prompt.js';
import { writeSinks, type ReportSink } from './sink.js';
import { PROBLEM_STATES, chatLine, creditsLine, creditsNotes, fileTotals, formatCredits, formatBytes, formatDuration, headOf, orderedCounts, redactUrl, totalJobs } from './format.js';
import type { ReportData, ReportFile, ReportJob, ReportSummary } from './types.js';

export interface HtmlOptions {
  /** Jobs with results shown as cards; the rest are counted. Default 2000. */
  galleryLimit?: number;
  /** Failed/uncertain/expired jobs listed; the rest are counted. Default 1000. */
  problemLimit?: number;
  /**
   * The folder report.html is written to, when it is not the run's output folder (`genbatch report --out DIR`):
   * file links then lead from there to the files in the output folder. Default: the output folder.
   */
  reportDir?: string;
}

const TEXT_CHARS = 4000;
const ERROR_CHARS = 2000;
/** Longest prompt shown on a card (and as alt text); the full one is in report.json and report.csv. */
const PROMPT_CHARS = 2000;
const ALT_CHARS = 500;
/** Input fields listed on a card besides the prompt, and the longest value shown of each. */
const INPUT_FIELDS = 12;
const INPUT_CHARS = 300;

/** Shows every <time datetime> in the reader's local time; the ISO text stays when a date does not parse. */
const LOCAL_TIME_SCRIPT =
  "for(const t of document.querySelectorAll('time[datetime]')){const d=new Date(t.dateTime);if(!isNaN(d.getTime())){t.title=t.dateTime;t.textContent=d.toLocaleString()}}";
const SCRIPT_HASH = createHash('sha256').update(LOCAL_TIME_SCRIPT).digest('base64');

/** An ISO time as a <time> element (its text the ISO time, shown in local time by the page's script). */
export function timeHtml(iso: string): string {
  const t = escapeHtml(iso);
  return `<time datetime="${t}">${t}</time>`;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** A relative URL for a file path under the output folder, or null when the path is not a plain relative path. */
export function fileHref(path: string): string | null {
  if (path === '' || path.startsWith('/') || path.includes('\\') || path.includes('\0')) return null;
  const segments = path.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) return null;
  return segments.map(encodeURIComponent).join('/');
}

type MediaKind = 'image' | 'audio' | 'video' | null;

const EXT_KIND: Record<string, MediaKind> = {
  png: 'image', jpg: 'image', jpeg: 'image', webp: 'image', gif: 'image', avif: 'image', bmp: 'image',
  mp3: 'audio', wav: 'audio', ogg: 'audio', m4a: 'audio', aac: 'audio', flac: 'audio', opus: 'audio',
  mp4: 'video', webm: 'video', mov: 'video', m4v: 'video',
};

/** How a file is shown: by the service's file_type, else its content type, else its extension. */
export function mediaKind(file: ReportFile): MediaKind {
  if (file.type === 'image' || file.type === 'audio' || file.type === 'video') return file.type;
  const ct = (file.contentType ?? '').toLowerCase();
  for (const kind of ['image', 'audio', 'video'] as const) if (ct.startsWith(`${kind}/`)) return kind;
  const ext = /\.([a-z0-9]+)$/i.exec(file.path)?.[1]?.toLowerCase() ?? '';
  return EXT_KIND[ext] ?? null;
}

function clip(text: string, max: number, note: string): string {
  return text.length > max ? `${escapeHtml(headOf(text, max))}<span class="note">… (${note})</span>` : escapeHtml(text);
}

function metaLine(job: ReportJob): string {
  const parts = [`<span class="badge s-${escapeHtml(job.state)}">${escapeHtml(job.state)}</span>`, escapeHtml(job.model)];
  if (job.where) parts.push(`<span class="tok">${escapeHtml(job.where)}</span>`);
  if (job.task_id) parts.push(`task <span class="tok">${escapeHtml(job.task_id)}</span>`);
  if (job.attempts > 1) parts.push(`${job.attempts} attempts`);
  if (job.finished_at) parts.push(`finished ${timeHtml(job.finished_at)}`);
  return parts.join(' · ');
}

/** What the job asked: its rows/matrix variables, its prompt, and its other input fields (scalars, lists in JSON). */
function askedHtml(job: ReportJob): string {
  let out = '';
  const vars = varsText(job.vars ?? {});
  if (vars !== '') out += `<p class="vars">${escapeHtml(vars)}</p>`;
  if (job.prompt) out += `<p class="prompt">${clip(job.prompt, PROMPT_CHARS, 'truncated; full prompt in report.json')}</p>`;
  const fields = Object.entries(job.input ?? {}).filter(([k, v]) => k !== 'messages' && v !== null && v !== undefined && !(typeof v === 'string' && v === job.prompt));
  if (fields.length > 0) {
    const shown = fields.slice(0, INPUT_FIELDS).map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${clip(typeof v === 'string' ? v : JSON.stringify(v), INPUT_CHARS, 'truncated')}</dd>`);
    const more = fields.length > INPUT_FIELDS ? `<dt class="note">and ${fields.length - INPUT_FIELDS} more</dt><dd class="note">in report.json</dd>` : '';
    out += `<dl class="input">${shown.join('')}${more}</dl>`;
  }
  return out;
}

/** The alt text of a job's images: its prompt (else its id), escaped for an attribute. */
function altText(job: ReportJob): string {
  const text = job.prompt && job.prompt.trim() !== '' ? job.prompt.replace(/\s+/g, ' ').trim() : job.id;
  return escapeHtml(text.length > ALT_CHARS ? `${headOf(text, ALT_CHARS - 1)}…` : text);
}

/**
 * The relative URL from `reportDir` to the output folder (`''` when they are the same, else ending in `/`),
 * each segment URL-encoded. Paths of files under the output folder are appended to it.
 */
export function linkBase(outDir: string, reportDir: string | undefined): string {
  if (reportDir === undefined) return '';
  const rel = relative(resolve(reportDir), resolve(outDir));
  if (rel === '') return '';
  return rel.split(sep).map(encodeURIComponent).join('/') + '/';
}

function mediaHtml(file: ReportFile, base: string, alt: string): string {
  const rel = fileHref(file.path);
  if (rel === null) return '';
  const src = escapeHtml(base + rel);
  switch (mediaKind(file)) {
    case 'image':
      return `<a href="${src}"><img src="${src}" alt="${alt}" loading="lazy"></a>`;
    case 'audio':
      return `<audio controls preload="none" src="${src}"></audio>`;
    case 'video':
      return `<video controls preload="metadata" src="${src}"></video>`;
    default:
      return '';
  }
}

function fileItem(file: ReportFile, base: string): string {
  const href = fileHref(file.path);
  const name = escapeHtml(file.path);
  const link = href === null ? `${name} <span class="note">(not linked: not a plain relative path)</span>` : `<a href="${escapeHtml(base + href)}">${name}</a>`;
  return `<li>${link} <span class="note">${escapeHtml(file.type)}, ${formatBytes(file.size)}</span></li>`;
}

/** One job's card; `base` is linkBase() (file links are `base` + the file's path under the output folder). */
export function cardHtml(job: ReportJob, base = ''): string {
  const alt = altText(job);
  const media = job.files.map((f) => mediaHtml(f, base, alt)).filter((m) => m !== '').join('');
  const texts = Object.entries(job.texts)
    .map(([name, text]) => `<dt>${escapeHtml(name)}</dt><dd><pre>${clip(text, TEXT_CHARS, 'truncated; full text in report.json')}</pre></dd>`)
    .join('');
  const files = job.files.length ? `<ul class="files">${job.files.map((f) => fileItem(f, base)).join('')}</ul>` : '';
  const error = job.error ? `<pre class="err">${clip(job.error, ERROR_CHARS, 'truncated')}</pre>` : '';
  return (
    `<article class="card"><h3>${escapeHtml(job.id)}</h3><p class="meta">${metaLine(job)}</p>` +
    askedHtml(job) +
    (media ? `<div class="media">${media}</div>` : '') +
    (texts ? `<dl class="texts">${texts}</dl>` : '') +
    files +
    error +
    '</article>\n'
  );
}

function problemHtml(job: ReportJob): string {
  const msg = job.error ? clip(job.error, ERROR_CHARS, 'truncated') : '<span class="note">no error message recorded</span>';
  return `<li><strong class="tok">${escapeHtml(job.id)}</strong> <span class="meta">${metaLine(job)}</span>${askedHtml(job)}<pre class="err">${msg}</pre></li>\n`;
}

/*
 * Long values wrap at word boundaries (overflow-wrap: break-word breaks a word only when it alone is wider
 * than the line, so "unknown" is never cut); `.tok` (ids, task ids, paths, URLs, hashes: long tokens with no
 * spaces) may break anywhere, and grid and flex children get min-width: 0 so nothing overflows at 390 px.
 */
const CSS = `
:root{color-scheme:light dark;--fg:#1b1b1b;--bg:#fafafa;--card:#fff;--line:#ddd;--muted:#666;--bad:#b00020;--ok:#1b7f3b;--warn:#a15c00}
@media (prefers-color-scheme:dark){:root{--fg:#e8e8e8;--bg:#161616;--card:#222;--line:#3a3a3a;--muted:#aaa;--bad:#ff6b81;--ok:#5fd38a;--warn:#f0b25a}}
*{box-sizing:border-box}body{margin:0;padding:1.5rem;font:15px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg);overflow-wrap:break-word}
@media (max-width:600px){body{padding:.75rem}}
h1{margin:0 0 .5rem;font-size:1.5rem}h2{margin:2rem 0 .75rem;font-size:1.2rem}h3{margin:0 0 .25rem;font-size:1rem;overflow-wrap:anywhere}
.summary{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2rem 1rem;margin:0}.summary dt{color:var(--muted)}.summary dd{margin:0;min-width:0}
.tok,.files,.summary .tok{overflow-wrap:anywhere}
.counts{display:flex;flex-wrap:wrap;gap:.4rem;margin:.75rem 0;padding:0;list-style:none}
.badge{display:inline-block;padding:.05rem .45rem;border:1px solid var(--line);border-radius:.6rem;font-size:.8rem}
.s-done{color:var(--ok)}.s-failed{color:var(--bad)}.s-uncertain,.s-expired{color:var(--warn)}
.gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(300px,100%),1fr));gap:1rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:.5rem;padding:.75rem;overflow:hidden;min-width:0}
.meta,.note{color:var(--muted);font-size:.85rem}.meta{margin:0 0 .5rem}
.prompt{margin:.25rem 0 .5rem;white-space:pre-wrap}.vars{margin:0 0 .25rem;font-size:.85rem;font-weight:600}
.input{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:0 .6rem;margin:0 0 .5rem;font-size:.8rem}.input dt{color:var(--muted)}.input dd{margin:0;min-width:0;overflow-wrap:anywhere}
.media{display:flex;flex-direction:column;gap:.5rem}.media img,.media video{display:block;max-width:100%;max-height:420px;border-radius:.3rem}.media audio{width:100%}
.files{margin:.5rem 0 0;padding-left:1.1rem;font-size:.85rem}
.texts dt{font-weight:600;font-size:.85rem}.texts dd{margin:0 0 .5rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.25rem 0;max-height:20rem;overflow:auto;font-size:.85rem}
.err{color:var(--bad)}.problems{padding-left:1.1rem}.problems li{margin-bottom:.5rem}
`;

/** The invocations of the run with their balance readings, and what "estimated" and "charged" measure. */
function creditsHtml(s: ReportSummary): string {
  const c = s.credits;
  const n = (v: number | null): string => (v === null ? 'unknown' : formatCredits(v));
  let out = '';
  if (c.invocations.length > 0) {
    out += '<ul class="note">';
    for (const inv of c.invocations) {
      const after = inv.charged_to === 'next-start' ? `not read (measured to the opening reading of invocation ${inv.n + 1})` : n(inv.balance_after);
      out += `<li>invocation ${inv.n}, started ${timeHtml(inv.started_at)}: balance before ${n(inv.balance_before)}, after ${after}; charged ${n(inv.charged)}; ${inv.submits === null ? 'submits not recorded' : `${inv.submits} submit${inv.submits === 1 ? '' : 's'} started`}</li>`;
    }
    out += '</ul>\n';
  }
  for (const note of creditsNotes(s)) out += `<p class="note">${escapeHtml(note)}</p>\n`;
  return out;
}

/** report.html as a sink: file totals, problems and cards (bounded) gathered job by job, everything written at the end. */
export function htmlSink(s: ReportSummary, options: HtmlOptions = {}): ReportSink {
  const galleryLimit = options.galleryLimit ?? 2000;
  const problemLimit = options.problemLimit ?? 1000;
  const base = linkBase(s.out_dir, options.reportDir);
  const cards: string[] = [];
  const problems: string[] = [];
  let moreCards = 0;
  let moreProblems = 0;
  let files = 0;
  let bytes = 0;
  return {
    start: () => '',
    job(job) {
      const t = fileTotals(job.files);
      files += t.count;
      bytes += t.bytes;
      if (PROBLEM_STATES.includes(job.state)) {
        if (problems.length < problemLimit) problems.push(problemHtml(job));
        else moreProblems++;
      }
      if (job.files.length > 0 || Object.keys(job.texts).length > 0) {
        if (cards.length < galleryLimit) cards.push(cardHtml(job, base));
        else moreCards++;
      }
      return '';
    },
    end() {
      const title = `genbatch report: ${s.manifest}`;
      const row = (k: string, v: string): string => `<dt>${k}</dt><dd>${v}</dd>`;
      const counts = orderedCounts(s.counts)
        .map(([state, n]) => `<li><span class="badge s-${escapeHtml(state)}">${escapeHtml(state)}: ${n}</span></li>`)
        .join('');
      const out: string[] = [];
      out.push(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">' +
          `<meta http-equiv="Content-Security-Policy" content="script-src 'sha256-${SCRIPT_HASH}'; object-src 'none'; base-uri 'none'; form-action 'none'">` +
          '<meta name="viewport" content="width=device-width,initial-scale=1">' +
          `<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${CSS}</style></head>\n<body>\n`,
      );
      out.push(
        `<h1>genbatch report</h1>\n<dl class="summary">` +
          row('Manifest', `<span class="tok">${escapeHtml(s.manifest)}</span>`) +
          row('Output', `<span class="tok">${escapeHtml(s.out_dir)}</span>`) +
          row('Service', `<span class="tok">${escapeHtml(redactUrl(s.base_url))}</span>${s.sandbox ? ' (sandbox)' : ''}`) +
          row('Time', `${timeHtml(s.started_at)} to ${timeHtml(s.finished_at)} (${formatDuration(s.wall_seconds)})`) +
          row('Credits', escapeHtml(creditsLine(s))) +
          (s.chat ? row('Chat', escapeHtml(chatLine(s.chat) ?? '')) : '') +
          row('Files', `${files} (${formatBytes(bytes)})`) +
          `</dl>\n<ul class="counts"><li><span class="badge">jobs: ${totalJobs(s.counts)}</span></li>${counts}</ul>\n` +
          creditsHtml(s),
      );
      if (problems.length > 0) {
        out.push(`<h2>Failed, uncertain and expired jobs (${problems.length + moreProblems})</h2>\n<ul class="problems">\n`);
        for (const p of problems) out.push(p);
        out.push('</ul>\n');
        if (moreProblems > 0) out.push(`<p class="note">and ${moreProblems} more, listed in report.csv and report.json.</p>\n`);
      }
      const withResults = cards.length + moreCards;
      out.push(`<h2>Results (${withResults} job${withResults === 1 ? '' : 's'})</h2>\n<div class="gallery">\n`);
      for (const c of cards) out.push(c);
      out.push('</div>\n');
      if (moreCards > 0) {
        out.push(`<p class="note">Only the first ${cards.length} jobs with results are shown, to keep this page openable; ${moreCards} more are listed with their files in report.json and report.csv.</p>\n`);
      }
      if (cards.length === 0 && moreCards === 0) out.push('<p class="note">No results.</p>\n');
      out.push(`<script>${LOCAL_TIME_SCRIPT}</script>\n</body></html>\n`);
      return out;
    },
  };
}

export async function writeHtmlReport(path: string, data: ReportData, options: HtmlOptions = {}): Promise<void> {
  await writeSinks([[path, htmlSink(data.summary, options)]], data.jobs());
}
