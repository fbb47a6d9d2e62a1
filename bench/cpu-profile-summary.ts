/**
 * Reads a V8 `.cpuprofile` (node --cpu-prof) and summarizes the samples between two points of
 * the monotonic clock (µs, as `process.hrtime` gives them): self time per function, and the
 * long tasks — stretches of consecutive busy samples (not idle, not GC-free program gaps)
 * longer than `longMs` — each named by the project frames (src/…) that held most of it.
 */
import { readFile } from 'node:fs/promises';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface LongTask {
  readonly startMs: number; // from the window's start
  readonly ms: number;
  /** Project frames (function file:line) by the time spent under them, most first, with ms. */
  readonly by: readonly { readonly frame: string; readonly ms: number }[];
}

export interface ProfileSummary {
  readonly busyMs: number;
  readonly self: readonly { readonly frame: string; readonly ms: number }[];
  /** Busy time by the innermost project frame (src/…) on the stack ("(outside src)" otherwise). */
  readonly byProjectFrame: readonly { readonly frame: string; readonly ms: number }[];
  readonly longTasks: readonly LongTask[];
}



function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^file:\/\//, '').replace(/.*\/(src|node_modules)\//, '$1/');
  return `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
}

export async function summarizeProfile(file: string, fromUs: number, toUs: number, longMs = 20): Promise<ProfileSummary> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const projectFrame = new Map<number, string>();
  const projectOf = (id: number): string => {
    const known = projectFrame.get(id);
    if (known) return known;
    let at: number | undefined = id;
    let found = '(outside src)';
    while (at !== undefined) {
      const n = byId.get(at)!;
      if (/\/src\//.test(n.callFrame.url) && !/node_modules/.test(n.callFrame.url)) {
        found = frameName(n);
        break;
      }
      at = parent.get(at);
    }
    projectFrame.set(id, found);
    return found;
  };
  const add = (map: Map<string, number>, key: string, ms: number) => map.set(key, (map.get(key) ?? 0) + ms);
  const self = new Map<string, number>();
  const project = new Map<string, number>();
  const longTasks: LongTask[] = [];
  let busyMs = 0;
  let t = profile.startTime;
  let task: { start: number; end: number; by: Map<string, number> } | undefined;
  const closeTask = () => {
    if (task && (task.end - task.start) / 1000 >= longMs) {
      const by = [...task.by].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([frame, ms]) => ({ frame, ms }));
      longTasks.push({ startMs: (task.start - fromUs) / 1000, ms: (task.end - task.start) / 1000, by });
    }
    task = undefined;
  };
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000; // this sample stands for the time until the next
    if (t < fromUs || t > toUs) continue;
    const node = byId.get(profile.samples[i])!;
    const name = node.callFrame.functionName;
    if (name === '(idle)' || name === '(program)') {
      closeTask();
      continue;
    }
    busyMs += dt;
    add(self, frameName(node), dt);
    const p = name === '(garbage collector)' ? '(garbage collector)' : projectOf(node.id);
    add(project, p, dt);
    task ??= { start: t, end: t, by: new Map() };
    task.end = t + dt * 1000;
    add(task.by, p, dt);
  }
  closeTask();
  const top = (map: Map<string, number>, n: number) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([frame, ms]) => ({ frame, ms }));
  return { busyMs, self: top(self, 15), byProjectFrame: top(project, 15), longTasks: longTasks.sort((a, b) => b.ms - a.ms) };
}


