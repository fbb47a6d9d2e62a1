/**
 * The demo model: aidreams260k, a small trained Llama shipped in this repository
 * (`models/aidreams260k/`, README and licence there). `--model demo` and `npm start` serve
 * it. The folder is found from this file's place in the installed package, never from the
 * working directory, so `npx meshnet serve` works from anywhere.
 */
import path from 'node:path';

/** The model spec that names the demo model (`--model demo`). */
export const DEMO_MODEL_ID = 'demo';

/** The shipped demo checkpoint folder, absolute. */
export const DEMO_MODEL_DIR = path.resolve(import.meta.dirname, '../../../models/aidreams260k');
