/**
 * Progress bars on a terminal, drawn by genbatch itself (not cli-progress):
 * every line is fitted to the terminal's width before it is written (labels
 * shortened, details and then the bar dropped, never wrapped), and the block
 * is redrawn in place on a resize and around every line printed above it.
 *
 * cli-progress could not do this: it cuts each line at the width by
 * characters (`estimateC` at 70 columns, and its log() cuts the lines printed
 * through it the same way, so the "stopping" line lost its end), and after a
 * resize it moves the cursor up by its own line count, which is wrong once the
 * terminal has re-wrapped the lines: bars were printed twice or vanished.
 *
 * The block is the last thing on the screen; the cursor waits at the start of
 * the line below it. A redraw goes back up over the rows the block takes at
 * the terminal's current width (terminals re-wrap long lines when they get
 * narrower: tmux, VTE, kitty, iTerm2, Windows Terminal), clears to the end of
 * the screen and writes the block again, all in one write.
 */

/** The terminal side of a stream: process.stderr on a TTY has columns, rows and a 'resize' event. */
interface Terminal extends NodeJS.WritableStream {
  columns?: number;
  rows?: number;
  getWindowSize?: () => [number, number];
}

/** One bar row: `label bar count extra`. */
export interface BarRow {
  label: string;
  /** The label when the width is short. */
  short: string;
  value: number;
  total: number;
  /** `33/80` */
  count: string;
  /** Details dropped first when the width is short: `jobs, 33 files`. */
  extra: string;
}

const LABEL = 10;
const SHORT = 4;
const BAR_MAX = 40;
/** How long a new terminal size must hold before the block is drawn at it. */
const SETTLE_MS = 150;

function bar(value: number, total: number, width: number): string {
  const full = total > 0 ? Math.max(0, Math.min(width, Math.round((value / total) * width))) : 0;
  return '█'.repeat(full) + '░'.repeat(width - full);
}

/** `text` cut to at most `width` characters. */
export function clip(text: string, width: number): string {
  return text.length <= width ? text : text.slice(0, Math.max(0, width));
}

/** The bar width for rows fitted to `width`: one for every row, so the bars line up; 30 characters left for the counts. */
export function barWidth(width: number): number {
  return Math.max(10, Math.min(BAR_MAX, width - LABEL - 2 - 30));
}

/** A bar row in at most `width` characters: the richest form that fits, with a bar `barW` wide where it can. */
export function fitRow(r: BarRow, width: number, barW = barWidth(width)): string {
  const long = r.label.padEnd(LABEL);
  const short = r.short.padEnd(SHORT);
  const tail = r.extra ? `${r.count} ${r.extra}` : r.count;
  const withBar: Array<[string, string, number]> = [
    [long, tail, barW],
    [long, r.count, barW],
    [long, r.count, 10],
    [short, r.count, 8],
  ];
  for (const [label, text, w] of withBar) {
    if (label.length + text.length + w + 2 <= width) return `${label} ${bar(r.value, r.total, w)} ${text}`;
  }
  for (const text of [`${long} ${tail}`, `${long} ${r.count}`, `${short} ${r.count}`]) if (text.length <= width) return text;
  return clip(`${short} ${r.count}`, width);
}

/** A text row (no bar): `label text`, the label shortened and then the text cut when the width is short. */
export function fitText(label: string, shortLabel: string, text: string, width: number): string {
  const long = `${label.padEnd(LABEL)} ${text}`;
  return long.length <= width ? long : clip(`${shortLabel.padEnd(SHORT)} ${text}`, width);
}

/**
 * The live block of lines at the bottom of a terminal. `render(width, height)`
 * gives the lines for a width (each at most `width` characters) and at most
 * `height` lines; it is called on every redraw.
 */
export class LiveBlock {
  /** Widths of the lines on the screen now (the block's rows are worked out from them at the current width). */
  private drawn: number[] = [];
  private readonly timer: NodeJS.Timeout;
  private stopped = false;
  /** The terminal's size at the last look, and when a change of it is taken as done. */
  private cols = 0;
  private rows = 0;
  private settledAt = 0;
  private readonly onResize = () => this.draw();
  private readonly showCursor = () => this.term.write('\u001b[?25h');

  constructor(
    private readonly term: Terminal,
    private readonly render: (width: number, height: number) => string[],
    everyMs = 200,
  ) {
    this.term.write('\u001b[?25l');
    process.on('exit', this.showCursor);
    this.term.on('resize', this.onResize);
    this.timer = setInterval(() => this.draw(), everyMs);
    this.timer.unref();
    [this.cols, this.rows] = this.size();
    this.draw();
  }

  /**
   * Redraw the block. After a resize the terminal re-wraps what it shows, and tmux, for one, applies the new
   * size to its screen and to the pseudo-terminal at different moments: a frame written in between is drawn
   * at the other width and its rows are miscounted. So a new size is first left to hold for a moment.
   */
  draw(force = false): void {
    if (this.stopped) return;
    const size = this.size();
    if (size[0] !== this.cols || size[1] !== this.rows) {
      [this.cols, this.rows] = size;
      this.settledAt = performance.now() + SETTLE_MS;
      setTimeout(() => this.draw(), SETTLE_MS + 10).unref();
      if (!force) return;
    }
    if (!force && performance.now() < this.settledAt) return;
    this.term.write(this.frame());
  }

  /** Print `text` (whole lines, any length: it wraps as any output does) above the block, then redraw the block. */
  print(text: string, stream: NodeJS.WritableStream = this.term): void {
    if (this.stopped) {
      stream.write(text);
      return;
    }
    if (stream === this.term) {
      this.term.write(this.frame(text));
      return;
    }
    // Another stream on the same terminal (stdout): clear the block, let that line out, draw the block again below it.
    this.term.write(this.cleared());
    stream.write(text);
    this.draw(true);
  }

  /** A last redraw; the block stays on the screen with the cursor below it. */
  stop(): void {
    if (this.stopped) return;
    this.draw(true);
    this.stopped = true;
    clearInterval(this.timer);
    this.term.removeListener('resize', this.onResize);
    process.removeListener('exit', this.showCursor);
    this.showCursor();
  }

  /**
   * The terminal's size asked of the terminal now: `columns` is updated only when SIGWINCH is handled, and a
   * redraw that ran between the resize and the signal would count the block's rows at the old width.
   */
  private size(): [cols: number, rows: number] {
    try {
      const [cols, rows] = this.term.getWindowSize?.() ?? [this.term.columns ?? 80, this.term.rows ?? 24];
      return [cols > 0 ? cols : 80, rows > 0 ? rows : 24];
    } catch {
      return [this.term.columns ?? 80, this.term.rows ?? 24];
    }
  }

  /** The rows the block takes on the screen at the current width (a terminal re-wraps long lines when it gets narrower). */
  private blockRows(): number {
    const cols = this.cols;
    return this.drawn.reduce((a, w) => a + Math.max(1, Math.ceil(w / cols)), 0);
  }

  /** Back to the first row of the block. */
  private up(): string {
    const rows = this.blockRows();
    this.drawn = [];
    return `\r${rows > 0 ? `\u001b[${rows}A` : ''}`;
  }

  /** Up to the block and the block cleared (see frame()), the cursor left at its top. */
  private cleared(): string {
    return `${this.up()}\u001b[2K\u001b[B\u001b[J\u001b[A`;
  }

  /**
   * The bytes of one redraw: up to the block, then `text` and the block over it, each line cleared to its
   * end, and the screen below the first line cleared. Not cleared from the block's first row: when the block
   * starts at the top of the screen (a resize re-wrapped it and pushed the rows above into the scrollback),
   * clearing to the end of the screen from there clears the whole screen, which tmux keeps by pushing the
   * screen into the scrollback: a copy of the bars there at every redraw.
   */
  private frame(text = ''): string {
    const up = this.up(); // before lines(), which records the new block's widths
    const body = `${text.replace(/\n/g, '\u001b[K\n')}${this.lines()}`;
    const first = body.indexOf('\n') + 1;
    return `${up}${body.slice(0, first)}\u001b[J${body.slice(first)}`;
  }

  private lines(): string {
    const { cols, rows } = this;
    // The last column stays free: a line that fills it leaves some terminals waiting to wrap.
    const width = Math.max(10, cols - 1);
    const lines = this.render(width, Math.max(1, rows - 1)).map((l) => clip(l, width));
    this.drawn = lines.map((l) => l.length);
    return lines.map((l) => `${l}\u001b[K\n`).join('');
  }
}
