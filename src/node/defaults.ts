/** Defaults shared by the `meshnet` command's flags and the library's options (library/start.ts). */

/** `--prefix-cache` / `prefixCacheMb` when not given: MB of prefix entries a peer (and the head's own layers) may keep. */
export const DEFAULT_PREFIX_CACHE_MB = 256;
