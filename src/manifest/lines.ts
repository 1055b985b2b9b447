import { createReadStream } from 'node:fs';

/**
 * The lines of a UTF-8 file, read as a stream: what `text.split('\n')` gives
 * (a `\r` before the `\n` is kept; the last line is given even when empty),
 * a chunk of the file's lines at a time. The file is never one string.
 */
export async function* readLines(file: string): AsyncGenerator<string[]> {
  const stream = createReadStream(file, { encoding: 'utf8', highWaterMark: 1 << 16 });
  let rest = '';
  try {
    for await (const chunk of stream as AsyncIterable<string>) {
      const text = rest + chunk;
      const out: string[] = [];
      let start = 0;
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
        out.push(text.slice(start, nl));
        start = nl + 1;
      }
      rest = text.slice(start);
      if (out.length > 0) yield out;
    }
    yield [rest];
  } finally {
    stream.destroy();
  }
}
