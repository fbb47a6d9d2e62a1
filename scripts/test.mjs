// `npm test`: the type check runs beside vitest's first group (it needs one core for ~30 s,
// and those test files leave part of the second idle), then Playwright once both passed.
// Exits with the first failing step's code.
import { spawn } from 'node:child_process';

/** Starts a package binary with inherited output: the child, and a promise of its exit code. */
function start(name, args) {
  const child = spawn(npx, args, { stdio: 'inherit' });
  const code = new Promise((resolve) => {
    child.on('error', (error) => {
      process.stderr.write(`${name}: ${error.message}\n`);
      resolve(1);
    });
    child.on('exit', (exit, signal) => resolve(exit ?? (signal ? 1 : 0)));
  });
  return { child, code };
}

const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const vitest = start('vitest', ['vitest', 'run']);
const typecheck = await start('typecheck', ['tsc', '--noEmit', '-p', 'tsconfig.json']).code;
process.stdout.write(typecheck === 0 ? 'typecheck: passed\n' : `typecheck: failed (exit ${typecheck})\n`);
if (typecheck !== 0) {
  // As `tsc && vitest` did: a type error fails the run now, not after the whole suite.
  vitest.child.kill('SIGTERM');
  process.exit(typecheck);
}
const tests = await vitest.code;
if (tests !== 0) process.exit(tests);
process.exit(await start('playwright', ['playwright', 'test']).code);
