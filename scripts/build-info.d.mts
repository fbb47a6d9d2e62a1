// Types of build-info.mjs (plain JavaScript: bin/meshnet.js loads it without a TypeScript loader).
export declare const BUILD_INFO: string;
/** The files a build reads, relative to `root` ('/'-separated), sorted. */
export declare function buildInputs(root: string): string[];
/** Why `dist` (a build of `root`, default `<root>/dist`) is not fresh, or undefined when it is. */
export declare function staleReason(root: string, dist?: string): string | undefined;
