// Types of malloc-env.mjs (plain JavaScript that bin/meshnet.js loads before tsx).
export declare const PEER_MALLOC_ENV: Readonly<{ MALLOC_ARENA_MAX: string; MALLOC_MMAP_THRESHOLD_: string }>;
export declare function isGlibc(): boolean;
export declare function peerMallocEnv(env?: NodeJS.ProcessEnv, glibc?: boolean): Record<string, string> | undefined;
export declare function reexec(script: string, args: readonly string[], add: Record<string, string>): Promise<number>;
export declare function watchParent(): boolean;
