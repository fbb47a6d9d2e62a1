#!/usr/bin/env node
// The meshnet command. Sources are TypeScript; tsx's loader runs them without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/node/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
