#!/usr/bin/env node
// The meshnet command. The installed package runs its built JavaScript (dist/). A checkout of
// the repository (src/ beside bin/) runs dist/ only while it was built from the sources as they
// are now (`npm run build`, which `npm ci` runs as `prepare`; scripts/build-info.mjs), and the
// TypeScript sources through tsx otherwise, so it never runs a stale build.
// MESHNET_RUN=source or MESHNET_RUN=dist chooses instead.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const sources = new URL('src/node/cli/main.ts', root);
const built = new URL('dist/node/cli/main.js', root);

/** 'source' or 'dist', or the reason neither can run. */
async function choose() {
  const forced = process.env.MESHNET_RUN;
  if (forced !== undefined && forced !== 'source' && forced !== 'dist') return { refused: `MESHNET_RUN is '${forced}': use source or dist, or leave it unset` };
  if (forced === 'source' || (forced === undefined && existsSync(sources))) {
    if (forced === 'source' || !existsSync(built)) return { run: 'source' };
    const { staleReason } = await import(new URL('scripts/build-info.mjs', root).href);
    return { run: staleReason(fileURLToPath(root)) === undefined ? 'dist' : 'source' };
  }
  if (!existsSync(built)) return { refused: `${fileURLToPath(built)} is missing: run 'npm run build' (or set MESHNET_RUN=source in a checkout)` };
  return { run: 'dist' };
}

const choice = await choose();
if (choice.refused) {
  process.stderr.write(`meshnet: ${choice.refused}\n`);
  process.exit(2);
}
// `meshnet peer` on glibc runs itself again under its malloc settings (src/node/malloc-env.mjs),
// before tsx or meshnet load, so this waiting parent stays small; MESHNET_MALLOC_ENV=0 turns it off.
let reexecuted;
if (process.argv[2] === 'peer') {
  const malloc = await import(new URL(choice.run === 'source' ? 'src/node/malloc-env.mjs' : 'dist/node/malloc-env.mjs', root).href);
  const add = malloc.watchParent() ? undefined : malloc.peerMallocEnv();
  if (add) reexecuted = await malloc.reexec(fileURLToPath(import.meta.url), process.argv.slice(2), add);
}
if (reexecuted !== undefined) {
  process.exitCode = reexecuted;
} else {
  if (choice.run === 'source') {
    const { register } = await import('tsx/esm/api');
    register();
  }
  const { main } = await import((choice.run === 'source' ? sources : built).href);
  process.exitCode = await main(process.argv.slice(2));
}
