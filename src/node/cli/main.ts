/** The `meshnet` command: subcommands, help, and one place that turns errors into exit codes. */
import { UsageError } from './args.ts';
import { WeightSpecError } from '../../core/model/quant/weight-format.ts';

interface Command {
  readonly summary: string;
  /** The command's module, loaded only when it runs: `meshnet --help` loads no engine. */
  load(): Promise<{ readonly usage: string; run(argv: string[]): Promise<void> }>;
}

const COMMANDS: Record<string, Command> = {
  generate: {
    summary: 'run a model (in one process, or across local peers) and print the generated text',
    load: () => import('./generate-command.ts').then((m) => ({ usage: m.GENERATE_USAGE, run: m.generateCommand })),
  },
  serve: {
    summary: 'run the head: OpenAI API, peers and dashboard (default model: demo)',
    load: () => import('./serve-command.ts').then((m) => ({ usage: m.SERVE_USAGE, run: m.serveCommand })),
  },
  peer: {
    summary: 'run a Node shard peer that joins a head',
    load: () => import('./peer-command.ts').then((m) => ({ usage: m.PEER_USAGE, run: m.peerCommand })),
  },
};

function help(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `meshnet — run one language model across many machines\n\nUsage: meshnet <command> [options]\n\nCommands:\n${lines.join('\n')}\n\nRun 'meshnet <command> --help' for a command's options.`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(help() + '\n');
    return name === undefined ? 2 : 0;
  }
  const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!entry) {
    process.stderr.write(`meshnet: unknown command '${name}'\n\n${help()}\n`);
    return 2;
  }
  const command = await entry.load();
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  try {
    await command.run(rest);
    return 0;
  } catch (error) {
    if (error instanceof UsageError || error instanceof WeightSpecError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`meshnet ${name}: ${(error as Error).message}\n\n${command.usage}\n`);
      return 2;
    }
    process.stderr.write(`meshnet ${name}: error: ${error instanceof Error ? error.message : String(error)}\n`);
    if (process.env.MESHNET_DEBUG) console.error(error);
    return 1;
  }
}
