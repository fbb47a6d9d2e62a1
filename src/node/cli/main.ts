/** The `meshnet` command: subcommands, help, and one place that turns errors into exit codes. */
import { GENERATE_USAGE, generateCommand } from './generate-command.ts';
import { UsageError } from './args.ts';
import { WeightSpecError } from '../../core/model/quant/weight-format.ts';
import { PEER_USAGE, peerCommand } from './peer-command.ts';
import { SERVE_USAGE, serveCommand } from './serve-command.ts';

interface Command {
  readonly summary: string;
  readonly usage: string;
  run(argv: string[]): Promise<void>;
}

const COMMANDS: Record<string, Command> = {
  generate: { summary: 'run a model (in one process, or across local peers) and print the generated text', usage: GENERATE_USAGE, run: generateCommand },
  serve: { summary: 'run the head: OpenAI API, peers and dashboard (default model: demo)', usage: SERVE_USAGE, run: serveCommand },
  peer: { summary: 'run a Node shard peer that joins a head', usage: PEER_USAGE, run: peerCommand },
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
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`meshnet: unknown command '${name}'\n\n${help()}\n`);
    return 2;
  }
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
