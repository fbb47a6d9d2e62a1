/**
 * Spawning Node peer processes on loopback (`--local-peers N`). The join token reaches
 * them through the environment, not the command line. Peers exit when the head goes away;
 * `close` also terminates them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { peerMallocEnv } from '../malloc-env.mjs';

const BIN = path.resolve(import.meta.dirname, '../../../bin/meshnet.js');

export interface LocalPeersOptions {
  readonly count: number;
  readonly headUrl: string; // ws://…/peer/ws
  readonly joinToken?: string;
  readonly link: 'relay' | 'direct';
  readonly device: string;
  readonly threads?: number;
  readonly memoryBudgetMb?: number;
  /** `--prefix-cache` for each peer (MB). */
  readonly prefixCacheMb?: number;
  readonly env?: NodeJS.ProcessEnv;
  /** Node options before the script (e.g. `--cpu-prof`, which NODE_OPTIONS refuses). */
  readonly execArgv?: readonly string[];
  readonly log?: (line: string) => void;
}

export interface LocalPeers {
  readonly processes: readonly ChildProcess[];
  close(): Promise<void>;
}

export function spawnLocalPeers(options: LocalPeersOptions): LocalPeers {
  const processes: ChildProcess[] = [];
  for (let i = 1; i <= options.count; i++) {
    const args = [...(options.execArgv ?? []), BIN, 'peer', '--head', options.headUrl, '--device', options.device, '--peer-id', `local-${i}`, '--once']; // --once: they live and die with the head that spawned them
    if (options.link === 'direct') args.push('--listen', '0');
    if (options.threads !== undefined) args.push('--threads', String(options.threads));
    if (options.memoryBudgetMb !== undefined) args.push('--memory-budget', String(options.memoryBudgetMb));
    if (options.prefixCacheMb !== undefined) args.push('--prefix-cache', String(options.prefixCacheMb));
    const env = { ...process.env, ...options.env };
    const child = spawn(process.execPath, args, {
      // glibc's malloc settings (with MESHNET_MALLOC_ENV=1) given here, so bin/meshnet.js need not run the peer again: the pid is the peer's own (benches read its peak RSS).
      env: { ...env, ...peerMallocEnv(env), ...(options.joinToken !== undefined && { MESHNET_JOIN_TOKEN: options.joinToken }) },
      stdio: ['ignore', 'inherit', 'pipe'],
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) options.log?.(`[local-${i}] ${line}`);
    });
    processes.push(child);
  }
  return {
    processes,
    async close() {
      await Promise.all(
        processes.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve();
              const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
              child.once('exit', () => (clearTimeout(timer), resolve()));
              child.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}
