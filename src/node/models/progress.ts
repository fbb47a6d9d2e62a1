/**
 * A textual download progress bar for stderr:
 * `model.safetensors  [#####---------------]  12.3/45.6 MB  27%`.
 * On a TTY one line per file is redrawn in place with `\r`; otherwise (logs, CI) each file
 * prints one line when it is done.
 */

/** One progress report for one file. Bytes; `total` is undefined when the server did not say. */
export interface DownloadProgress {
  readonly file: string;
  readonly received: number;
  readonly total: number | undefined;
  /** True on the last report of a file, once it is complete on disk. */
  readonly done: boolean;
}

const BAR_WIDTH = 20;
const REDRAW_INTERVAL_MS = 100;

/** The progress line of `p`, without any control characters. */
export function formatProgress(p: Pick<DownloadProgress, 'file' | 'received' | 'total'>): string {
  const mb = (bytes: number): string => (bytes / 1e6).toFixed(1);
  if (p.total === undefined || p.total <= 0) return `${p.file}  ${mb(p.received)} MB`;
  const fraction = Math.min(1, p.received / p.total);
  const filled = Math.round(fraction * BAR_WIDTH);
  const bar = '#'.repeat(filled) + '-'.repeat(BAR_WIDTH - filled);
  return `${p.file}  [${bar}]  ${mb(p.received)}/${mb(p.total)} MB  ${Math.floor(fraction * 100)}%`;
}

/** The part of a stream the reporter needs (process.stderr fits). */
export interface ProgressStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/**
 * A progress callback that draws on `stream` (default process.stderr). On a TTY it redraws
 * at most every 100 ms and always on a file's last report; elsewhere it writes one line per
 * finished file.
 */
export function createProgressReporter(stream: ProgressStream = process.stderr): (p: DownloadProgress) => void {
  let lastDraw = 0;
  return (p) => {
    if (!stream.isTTY) {
      if (p.done) stream.write(`${formatProgress(p)}\n`);
      return;
    }
    const now = Date.now();
    if (!p.done && now - lastDraw < REDRAW_INTERVAL_MS) return;
    lastDraw = now;
    // \x1b[K clears what a longer previous line left behind.
    stream.write(`\r${formatProgress(p)}\x1b[K${p.done ? '\n' : ''}`);
  };
}
