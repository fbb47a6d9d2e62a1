// `npm test`: the type check runs beside vitest's first group (it needs one core for ~30 s,
// and those test files leave part of the second idle), then Playwright once both passed.
// Exits with the first failing step's code.
import { spawn } from 'node:child_process';

/** Runs a package binary with inherited output; resolves to its exit code. */
function run(name, command, args) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'inherit', shell: false });
    child.on('error', (error) => {
      process.stderr.write(`${name}: ${error.message}\n`);
      resolve(1);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const [typecheck, vitest] = await Promise.all([
  run('typecheck', npx, ['tsc', '--noEmit', '-p', 'tsconfig.json']).then((code) => {
    process.stdout.write(code === 0 ? 'typecheck: passed\n' : `typecheck: failed (exit ${code})\n`);
    return code;
  }),
  run('vitest', npx, ['vitest', 'run']),
]);
if (typecheck !== 0 || vitest !== 0) process.exit(typecheck || vitest);
process.exit(await run('playwright', npx, ['playwright', 'test']));
