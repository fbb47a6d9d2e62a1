/**
 * Server-sent events as `/v1/chat/completions` streams them: `data: {…}` blocks separated by
 * a blank line, ending with `data: [DONE]`. `takeEvents` splits a growing buffer into
 * complete events' data and the unfinished rest. Pure.
 */
export function takeEvents(buffer: string): { data: string[]; rest: string } {
  const data: string[] = [];
  const normalized = buffer.replace(/\r\n/g, '\n');
  const blocks = normalized.split('\n\n');
  const rest = blocks.pop() ?? '';
  for (const block of blocks) {
    const lines = block.split('\n').filter((line) => line.startsWith('data:'));
    if (lines.length > 0) data.push(lines.map((line) => line.slice(5).replace(/^ /, '')).join('\n'));
  }
  return { data, rest };
}
