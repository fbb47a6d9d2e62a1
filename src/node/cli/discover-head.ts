/**
 * `meshnet peer` without `--head`: browse the LAN for heads (lan-discovery.ts), list them on
 * stderr, and pick one: the only compatible head is joined; with several, a terminal is asked
 * which (by number), and without a terminal (a script, a service) the peer refuses with the
 * list — exit 2, like any usage error — so it never joins a head nobody chose. No head, or
 * none this peer's protocol can join, is a usage error too.
 */
import { createInterface } from 'node:readline/promises';
import { browseHeads, describeHeads, type FoundHead } from '../discovery/lan-discovery.ts';
import { UsageError } from './args.ts';

export interface DiscoverOptions {
  readonly waitMs: number;
  /** Ask on the terminal when several heads answer (stdin and stderr are TTYs). */
  readonly interactive: boolean;
  readonly log: (line: string) => void;
  /** The browse (tests may hand in a list). */
  readonly browse?: (waitMs: number) => Promise<FoundHead[]>;
  /** Asks which head (1-based); default a readline prompt on stderr. */
  readonly ask?: (question: string) => Promise<string>;
}

async function prompt(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

/** The peer endpoint URL to join. Throws UsageError when there is nothing to join or nobody chose. */
export async function discoverHead(options: DiscoverOptions): Promise<string> {
  const heads = await (options.browse ?? browseHeads)(options.waitMs);
  const seconds = `${(options.waitMs / 1000).toFixed(1)} s`;
  if (heads.length === 0) throw new UsageError(`no meshnet head answered on the LAN within ${seconds} (its --no-announce, a head on 127.0.0.1, or multicast blocked?): pass --head ws://HOST:PORT/peer/ws`);
  options.log(`found ${heads.length} head${heads.length === 1 ? '' : 's'} on the LAN:\n${describeHeads(heads)}`);
  const joinable = heads.filter((h) => h.compatible);
  if (joinable.length === 0) throw new UsageError('no head on the LAN speaks this peer\'s protocol version: update meshnet, or pass --head');
  if (joinable.length === 1) {
    options.log(`joining ${joinable[0].url}`);
    return joinable[0].url;
  }
  if (!options.interactive) throw new UsageError(`${joinable.length} heads answered on the LAN; choose one with --head:\n${describeHeads(heads)}`);
  const answer = (await (options.ask ?? prompt)(`which head (1-${heads.length})? `)).trim();
  const chosen = heads[Number(answer) - 1];
  if (!/^\d+$/.test(answer) || chosen === undefined) throw new UsageError(`'${answer}' is not one of 1-${heads.length}`);
  if (!chosen.compatible) throw new UsageError(`${chosen.url} speaks protocol ${chosen.protocol}, which this peer cannot join`);
  return chosen.url;
}
