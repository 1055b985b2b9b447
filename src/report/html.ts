/**
 * report.html: a self-contained gallery that opens from disk (inline CSS, one inline script allowed by
 * its hash, no external resource apart from the result files, linked by relative path from the folder
 * report.html is in: the output folder, or another one given to `genbatch report --out`).
 *
 * Every job rides in the page as one compact JSON row (src/report/html-data.ts) inside
 * `<script type="application/json">`; the page's script (src/report/html-app.ts) shows one page of
 * cards at a time with search, filters (state, model, kind) and sort, so a 100,000-job report opens
 * quickly. Each card shows what the job asked (prompt, also the images' alt text; rows/matrix
 * variables; its other input fields) beside the results: images shown, audio and video playable with
 * a label, text results shown. Failed, uncertain and expired jobs are listed first as plain HTML with
 * their prompts and messages. Times are written in ISO 8601 (UTC) inside <time> elements and shown in
 * the reader's local time.
 *
 * Everything that comes from the manifest or the service is HTML-escaped (or, in the script, set as
 * text); the JSON never holds a `<`; file paths are URL-encoded segment by segment, and a path that
 * could leave the output folder (absolute, "..", backslash) is shown but not linked. One pass over the
 * jobs: rows are written as they come; at most `problemLimit` problems are kept in memory.
 */
import { createHash } from 'node:crypto';
import { posix, relative, resolve, sep } from 'node:path';
import { UsageError } from '../errors.js';
import { APP_SCRIPT } from './html-app.js';
import { PageData } from './html-data.js';
import { varsText } from './prompt.js';
import { writeSinks, type ReportSink } from './sink.js';
import { PROBLEM_STATES, chatLine, creditsLine, creditsNotes, fileTotals, formatCredits, formatBytes, formatDuration, headOf, orderedCounts, redactUrl, totalJobs } from './format.js';
import type { ReportData, ReportInvocation, ReportJob, ReportSummary } from './types.js';

export { fileHref, mediaKind } from './html-data.js';

export interface HtmlOptions {
  /** Jobs carried in the page (searchable, shown as cards a page at a time); the rest are counted. Default 200,000. */
  galleryLimit?: number;
  /** Failed/uncertain/expired jobs listed; the rest are counted. Default 1000. */
  problemLimit?: number;
  /**
   * The folder report.html is written to, when it is not the run's output folder (`genbatch report --out DIR`):
   * file links then lead from there to the files in the output folder. Default: the output folder.
   */
  reportDir?: string;
  /** The row builder (default: a new one with links from `reportDir`); the view keeps one, so that later rows use the same tables. */
  pageData?: PageData;
  /**
   * A second inline script, run before the gallery's (allowed by its hash too), with its JSON data in
   * `<script type="application/json" id="gb-live">`: the view's live updates and marks (src/view/). The
   * controls and gallery are written even with no job yet.
   */
  live?: { script: string; data: string };
  /**
   * The view: the page carries only the jobs given to job() (its first rows; the rest come from the view's
   * /api/rows), and what report.html counts over every job comes from here: the number of jobs, the files
   * and their bytes, and the problems (the first `problemLimit` of them, in manifest order, and how many in all).
   */
  totals?: { jobs: number; files: { count: number; bytes: number }; problems: readonly ReportJob[]; problemCount: number };
}

const ERROR_CHARS = 2000;
/** Longest prompt shown in the problem list; the full one is in report.json and report.csv. */
const PROMPT_CHARS = 2000;

const SCRIPT_HASH = createHash('sha256').update(APP_SCRIPT).digest('base64');

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** An ISO time as a <time> element (its text the ISO time, shown in local time by the page's script). */
export function timeHtml(iso: string): string {
  const t = escapeHtml(iso);
  return `<time datetime="${t}">${t}</time>`;
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

/**
 * The relative URL from `reportDir` to the output folder (`''` when they are the same, else ending in `/`),
 * each segment URL-encoded. Paths of files under the output folder are appended to it.
 */
export function linkBase(outDir: string, reportDir: string | undefined): string {
  if (reportDir === undefined) return '';
  const rel = S3_URL.test(outDir) || S3_URL.test(reportDir) ? bucketRelative(outDir, reportDir) : relative(resolve(reportDir), resolve(outDir)).split(sep).join('/');
  if (rel === '') return '';
  return rel.split('/').map(encodeURIComponent).join('/') + '/';
}

const S3_URL = /^s3:\/\//i;

/**
 * From a report prefix to the results' prefix in the same bucket, as a relative URL (a bucket serving the
 * page, or the bucket synced to a disk, resolves it alike). Results on disk and reports in a bucket (or the
 * other way round, or another bucket) have no relative link: a UsageError.
 */
function bucketRelative(outDir: string, reportDir: string): string {
  const out = /^s3:\/\/([^/]+)\/?(.*)$/i.exec(outDir);
  const rep = /^s3:\/\/([^/]+)\/?(.*)$/i.exec(reportDir);
  if (!out || !rep || out[1] !== rep[1]) {
    throw new UsageError(`--out ${reportDir}: report.html links the results by relative paths, and the run's results are in ${outDir}; write the reports ${out ? `in the bucket ${out[1]}` : 'on this disk'}`);
  }
  const trim = (p: string) => p.replace(/^\/+|\/+$/g, '');
  return posix.relative(`/${trim(rep[2]!)}`, `/${trim(out[2]!)}`);
}

function problemHtml(job: ReportJob): string {
  const msg = job.error ? clip(job.error, ERROR_CHARS, 'truncated') : '<span class="note">no error message recorded</span>';
  const vars = varsText(job.vars ?? {});
  const asked = (vars !== '' ? `<p class="vars">${escapeHtml(vars)}</p>` : '') + (job.prompt ? `<p class="prompt">${clip(job.prompt, PROMPT_CHARS, 'truncated; full prompt in report.json')}</p>` : '');
  return `<li><strong class="tok">${escapeHtml(job.id)}</strong> <span class="meta">${metaLine(job)}</span>${asked}<pre class="err">${msg}</pre></li>\n`;
}

/*
 * Long values wrap at word boundaries (overflow-wrap: break-word breaks a word only when it alone is wider
 * than the line, so "unknown" is never cut); `.tok` (ids, task ids, paths, URLs, hashes: long tokens with no
 * spaces) may break anywhere, and grid and flex children get min-width: 0 so nothing overflows at 390 px.
 */
export const CSS = `
:root{color-scheme:light dark;--fg:#1b1b1b;--bg:#fafafa;--card:#fff;--line:#ddd;--muted:#666;--bad:#b00020;--ok:#1b7f3b;--warn:#a15c00}
@media (prefers-color-scheme:dark){:root{--fg:#e8e8e8;--bg:#161616;--card:#222;--line:#3a3a3a;--muted:#aaa;--bad:#ff6b81;--ok:#5fd38a;--warn:#f0b25a}}
*{box-sizing:border-box}[hidden]{display:none!important}body{margin:0;padding:1.5rem;font:15px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg);overflow-wrap:break-word}
@media (max-width:600px){body{padding:.75rem}}
h1{margin:0 0 .5rem;font-size:1.5rem}h2{margin:2rem 0 .75rem;font-size:1.2rem}h3{margin:0 0 .25rem;font-size:1rem;overflow-wrap:anywhere}
.summary{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2rem 1rem;margin:0}.summary dt{color:var(--muted)}.summary dd{margin:0;min-width:0}
.tok,.files{overflow-wrap:anywhere}
.counts{display:flex;flex-wrap:wrap;gap:.4rem;margin:.75rem 0;padding:0;list-style:none}
.badge{display:inline-block;padding:.05rem .45rem;border:1px solid var(--line);border-radius:.6rem;font-size:.8rem}
.s-done{color:var(--ok)}.s-failed{color:var(--bad)}.s-uncertain,.s-expired{color:var(--warn)}
.gallery{--card-w:300px;display:grid;grid-template-columns:repeat(auto-fill,minmax(min(var(--card-w),100%),1fr));gap:1rem}.gallery[data-size=s]{--card-w:190px}.gallery[data-size=l]{--card-w:420px}
.card{position:relative;display:flex;flex-direction:column;background:var(--card);border:1px solid var(--line);border-radius:.5rem;padding:.75rem;overflow:hidden;min-width:0}
.gallery>.card>.media{order:-1;margin:-.75rem -.75rem .6rem}.gallery>.card>.media img{width:100%;height:auto;max-height:75vh;object-fit:contain;border-radius:0;background:color-mix(in srgb,var(--line),transparent 60%)}.gallery>.card>.media .player{margin:.6rem .75rem 0}
.card>.review{order:1}.card>.more{order:2;margin-top:.5rem}.more>summary{cursor:pointer;color:var(--muted);font-size:.85rem}
.status{margin:0 0 .25rem;display:flex;flex-wrap:wrap;gap:.3rem}
.card.marked-approved{border:3px solid var(--ok)}.card.marked-rejected{border:3px solid var(--bad)}.card.marked-rejected>.media img{opacity:.3;filter:grayscale(1)}
.card.marked-approved::before,.card.marked-rejected::before{position:absolute;top:.5rem;left:.5rem;z-index:1;padding:.15rem .6rem;border-radius:.4rem;color:#fff;font-weight:700;font-size:.9rem}
.card.marked-approved::before{content:"\\2713  approved";background:var(--ok)}.card.marked-rejected::before{content:"\\2715  rejected";background:var(--bad)}
.badge.m-approved{background:var(--ok);color:#fff;border-color:var(--ok)}.badge.m-rejected{background:var(--bad);color:#fff;border-color:var(--bad)}
#gb-lb{position:fixed;inset:0;z-index:1000;display:grid;grid-template-rows:minmax(0,1fr) auto;background:#0b0b0b;color:#eee}
#gb-lb .lb-img{display:flex;min-height:0;padding:.5rem}#gb-lb img{flex:1 1 auto;width:100%;height:100%;min-width:0;min-height:0;object-fit:contain}
#gb-lb .lb-bar{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;padding:.6rem 1rem;background:#111}#gb-lb .lb-bar button{font:inherit}#gb-lb .lb-text{flex:1 1 20rem;min-width:0;max-height:6rem;overflow:auto}
#gb-lb .lb-bar{border-top:6px solid #333}#gb-lb.lb-approved .lb-bar{border-top-color:var(--ok)}#gb-lb.lb-rejected .lb-bar{border-top-color:var(--bad)}
.side .media img{width:100%;height:auto;max-height:80vh;object-fit:contain}
.meta,.note{color:var(--muted);font-size:.85rem}.meta{margin:0 0 .5rem}
.prompt{margin:.25rem 0 .5rem;white-space:pre-wrap}.vars{margin:0 0 .25rem;font-size:.85rem;font-weight:600}
.input{display:grid;grid-template-columns:minmax(0,max-content) minmax(0,1fr);gap:0 .6rem;margin:0 0 .5rem;font-size:.8rem}.input dt{color:var(--muted);overflow-wrap:anywhere}.input dd{margin:0;min-width:0;overflow-wrap:anywhere}
.media{display:flex;flex-direction:column;gap:.5rem}.media img,.media video{display:block;max-width:100%;max-height:420px;border-radius:.3rem}.media audio{width:100%}
.player{margin:0}.player figcaption{font-size:.85rem;font-weight:600;margin-bottom:.15rem}.track{margin:0 0 .5rem;font-size:.85rem}
.controls{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:0 0 1rem}.controls input,.controls select{font:inherit;max-width:100%;min-width:0}.controls input{flex:1 1 14rem}
.pager{display:flex;flex-wrap:wrap;gap:.75rem;align-items:center;margin:1rem 0}
.files{margin:.5rem 0 0;padding-left:1.1rem;font-size:.85rem}
.texts dt{font-weight:600;font-size:.85rem}.texts dd{margin:0 0 .5rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.25rem 0;max-height:20rem;overflow:auto;font-size:.85rem}
.m-approved{color:var(--ok)}.m-rejected{color:var(--bad)}
.review{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center;margin:.5rem 0 0}.review button,.bar button,.bar input{font:inherit;max-width:100%;min-width:0}
.bar{position:sticky;top:0;z-index:5;display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;padding:.5rem 0;background:var(--bg)}.bar input{flex:1 1 10rem}
.card{scroll-margin:7rem 0 1rem}.card.current{outline:3px solid #3b82f6;outline-offset:1px}.card.sel{border-color:#3b82f6;background:color-mix(in srgb,var(--card),#3b82f6 8%)}
.side{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(280px,100%),1fr));gap:1rem}
table{border-collapse:collapse;width:100%;font-size:.85rem}td,th{border-bottom:1px solid var(--line);padding:.25rem .4rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}th,td.n{white-space:nowrap;overflow-wrap:normal}
.gridbox{overflow-x:auto;width:fit-content;max-width:100%;border:1px solid var(--line);border-radius:.5rem;background:var(--card)}.axes label{white-space:nowrap}
table.mgrid{width:auto;border-collapse:collapse}.mgrid th,.mgrid td{border:1px solid var(--line);padding:.3rem;vertical-align:top;overflow-wrap:normal;white-space:normal}.mgrid th{font-weight:600;background:var(--bg)}
.mgrid .gitem{display:block;width:7.5rem;margin:0 0 .3rem;color:inherit;text-decoration:none;font-size:.75rem;overflow-wrap:anywhere}.mgrid .gitem img{display:block;width:7.5rem;height:7.5rem;object-fit:cover;border-radius:.3rem;margin-bottom:.15rem}.mgrid .gitem .badge{display:block;width:max-content;margin-bottom:.15rem}
@media (max-width:600px){.mgrid .gitem,.mgrid .gitem img{width:5.5rem}.mgrid .gitem img{height:5.5rem}}
.err{color:var(--bad)}.problems{padding-left:1.1rem}.problems li{margin-bottom:.5rem}
`;

/** What follows "invocation N, started <time>" in the credits list: its readings, charge and submits. */
export function invocationTail(inv: ReportInvocation): string {
  const n = (v: number | null): string => (v === null ? 'unknown' : formatCredits(v));
  const after = inv.running === true ? 'not yet (running)' : inv.charged_to === 'next-start' ? `not read (measured to the opening reading of invocation ${inv.n + 1})` : n(inv.balance_after);
  return `: balance before ${n(inv.balance_before)}, after ${after}; charged ${inv.running === true ? 'when it ends' : n(inv.charged)}; ${inv.submits === null ? (inv.running === true ? 'running' : 'submits not recorded') : `${inv.submits} submit${inv.submits === 1 ? '' : 's'} started`}`;
}

/** The invocations of the run with their balance readings, and what "estimated" and "charged" measure (in `#gb-credits`, which the view redraws). */
function creditsHtml(s: ReportSummary): string {
  const c = s.credits;
  let out = '<div id="gb-credits">';
  if (s.refused) out += `<p class="note"><strong>The last invocation was refused before sending</strong> (exit ${s.refused.exit_code}): ${escapeHtml(s.refused.reason)}</p>\n`;
  if (c.invocations.length > 0) {
    out += '<ul class="note">';
    for (const inv of c.invocations) {
      const jobs = inv.jobs ? `; jobs it last sent: ${inv.jobs.sent}, done ${inv.jobs.done}, failed ${inv.jobs.failed}; charge ${inv.charged_source ?? 'unknown'}` : '';
      out += `<li>invocation ${inv.n}, started ${timeHtml(inv.started_at)}${escapeHtml(invocationTail(inv) + jobs)}</li>`;
    }
    out += '</ul>\n';
  }
  for (const note of creditsNotes(s)) out += `<p class="note">${escapeHtml(note)}</p>\n`;
  return `${out}</div>\n`;
}

const CONTROLS =
  '<div class="controls" id="gb-controls" hidden>' +
  '<input id="gb-q" type="search" placeholder="Search id, prompt, any input value" aria-label="Search">' +
  '<select id="gb-state" aria-label="State"><option value="">every state</option></select>' +
  '<select id="gb-model" aria-label="Model"><option value="">every model</option></select>' +
  '<select id="gb-kind" aria-label="Kind of result"><option value="">every kind</option></select>' +
  '<select id="gb-mark" aria-label="Review mark"><option value="">every mark</option></select>' +
  '<select id="gb-sort" aria-label="Sort"><option value="order">manifest order</option><option value="id">id</option><option value="state">state</option><option value="model">model</option><option value="newest">newest first</option><option value="oldest">oldest first</option></select>' +
  '<select id="gb-size" aria-label="Image size"><option value="s">small images</option><option value="m" selected>medium images</option><option value="l">large images</option></select>' +
  '<select id="gb-layout" aria-label="Layout" hidden><option value="cards">cards</option><option value="grid">grid</option></select>' +
  '<span id="gb-axes" class="axes" hidden><label>across <select id="gb-across" aria-label="Variable across"></select></label> <label>down <select id="gb-down" aria-label="Variable down"></select></label></span>' +
  '<span id="gb-info" class="note" aria-live="polite"></span></div>\n';

const PAGER = '<div class="pager" id="gb-pager"><button type="button" id="gb-prev">Previous</button><span id="gb-page" class="note"></span><button type="button" id="gb-next">Next</button></div>\n';

/**
 * report.html as a sink: the head and the start of the jobs' JSON first, one row per job as it comes
 * (at most `galleryLimit`), then the summary, the problems (bounded), the controls and the script.
 */
export function htmlSink(s: ReportSummary, options: HtmlOptions = {}): ReportSink {
  const galleryLimit = options.galleryLimit ?? 200_000;
  const problemLimit = options.problemLimit ?? 1000;
  const data = options.pageData ?? new PageData(linkBase(s.out_dir, options.reportDir));
  const live = options.live;
  const hashes = [SCRIPT_HASH, ...(live ? [createHash('sha256').update(live.script).digest('base64')] : [])].map((h) => `'sha256-${h}'`).join(' ');
  const totals = options.totals;
  const problems: string[] = totals ? totals.problems.slice(0, problemLimit).map(problemHtml) : [];
  let rows = 0;
  let moreRows = 0;
  let moreProblems = totals ? Math.max(0, totals.problemCount - problems.length) : 0;
  let files = totals?.files.count ?? 0;
  let bytes = totals?.files.bytes ?? 0;
  const title = `genbatch ${live ? 'view' : 'report'}: ${s.manifest}`;
  return {
    start: () =>
      '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">' +
      `<meta http-equiv="Content-Security-Policy" content="script-src ${hashes}; object-src 'none'; base-uri 'none'; form-action 'none'">` +
      '<meta name="viewport" content="width=device-width,initial-scale=1">' +
      `<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${CSS}</style></head>\n<body>\n<script type="application/json" id="gb-jobs">[`,
    job(job) {
      if (totals) return `${rows++ === 0 ? '\n' : ',\n'}${data.row(job)}`;
      const t = fileTotals(job.files);
      files += t.count;
      bytes += t.bytes;
      if (PROBLEM_STATES.includes(job.state)) {
        if (problems.length < problemLimit) problems.push(problemHtml(job));
        else moreProblems++;
      }
      if (rows >= galleryLimit) {
        moreRows++;
        return '';
      }
      return `${rows++ === 0 ? '\n' : ',\n'}${data.row(job)}`;
    },
    end() {
      const row = (k: string, v: string, id?: string): string => `<dt>${k}</dt><dd${id ? ` id="${id}"` : ''}>${v}</dd>`;
      const counts = orderedCounts(s.counts)
        .map(([state, n]) => `<li><span class="badge s-${escapeHtml(state)}">${escapeHtml(state)}: ${n}</span></li>`)
        .join('');
      const out: string[] = [`\n]</script>\n<script type="application/json" id="gb-meta">${data.meta(moreRows)}</script>\n`];
      out.push(
        `<h1>genbatch ${live ? 'view' : 'report'}</h1>\n<dl class="summary">` +
          row('Manifest', `<span class="tok">${escapeHtml(s.manifest)}</span>`) +
          row('Output', `<span class="tok">${escapeHtml(s.out_dir)}</span>`) +
          row('Service', `<span class="tok">${escapeHtml(redactUrl(s.base_url))}</span>${s.sandbox ? ' (sandbox)' : ''}`) +
          row('Time', `${timeHtml(s.started_at)} to ${timeHtml(s.finished_at)} (${formatDuration(s.wall_seconds)})`, 'gb-h-time') +
          row('Credits', escapeHtml(creditsLine(s)), 'gb-h-credits') +
          (s.chat ? row('Chat', escapeHtml(chatLine(s.chat) ?? '')) : '') +
          row('Files', `${files} (${formatBytes(bytes)})`, 'gb-h-files') +
          `</dl>\n<ul class="counts" id="gb-counts"><li><span class="badge">jobs: ${totalJobs(s.counts)}</span></li>${counts}</ul>\n` +
          creditsHtml(s),
      );
      if (problems.length > 0) {
        out.push(`<h2>Failed, uncertain and expired jobs (${problems.length + moreProblems})</h2>\n<ul class="problems">\n`);
        for (const p of problems) out.push(p);
        out.push('</ul>\n');
        if (moreProblems > 0) out.push(`<p class="note">and ${moreProblems} more, listed in report.csv and report.json.</p>\n`);
      }
      out.push(`<h2 id="gb-jobs-title">Jobs (${totals ? totals.jobs : rows + moreRows})</h2>\n`);
      if (rows === 0 && !live) out.push('<p class="note">No jobs.</p>\n');
      else {
        out.push(CONTROLS, '<div class="gallery" id="gb-gallery"></div>\n<div class="gridbox" id="gb-grid" hidden></div>\n', PAGER);
        out.push('<noscript><p class="note">The cards are drawn by the page\'s script: every job is listed in report.csv and report.json.</p></noscript>\n');
      }
      if (moreRows > 0) out.push(`<p class="note">Only the first ${rows} jobs are in this page, to keep it openable; ${moreRows} more are listed in report.json and report.csv.</p>\n`);
      if (live) out.push(`<script type="application/json" id="gb-live">${live.data}</script>\n<script>${live.script}</script>\n`);
      out.push(`<script>${APP_SCRIPT}</script>\n</body></html>\n`);
      return out;
    },
  };
}

export async function writeHtmlReport(path: string, data: ReportData, options: HtmlOptions = {}): Promise<void> {
  await writeSinks([[path, htmlSink(data.summary, options)]], data.jobs());
}
