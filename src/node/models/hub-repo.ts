/**
 * Hugging Face Hub names: repo ids (`org/name`), revisions and file names, validated before
 * any of them reaches a URL or a path on disk, and the error every Hub download raises.
 */

/** A failed Hub download or a refused name. `file` and `status` say what failed, when known. */
export class HubDownloadError extends Error {
  override readonly name = 'HubDownloadError';

  constructor(
    message: string,
    /** The repository file that failed (e.g. `config.json`), if the failure concerns one. */
    readonly file?: string,
    /** The HTTP status the Hub answered, if it answered. */
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface HubRepoId {
  readonly org: string;
  readonly name: string;
}

// The Hub's own rule: letters, digits, `-`, `_`, `.`; no `--` or `..`; no `-`/`.` at either
// end; at most 96 characters. Refusing `--` also keeps the `<org>--<name>` folder unambiguous.
const REPO_PART = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$/;
const REVISION = /^[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;
const FILE_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

function validPart(part: string): boolean {
  return REPO_PART.test(part) && !part.includes('--') && !part.includes('..');
}

/** True when `spec` has the shape of a Hub repo id, `org/name`. */
export function isHubRepoId(spec: string): boolean {
  const parts = spec.split('/');
  return parts.length === 2 && parts.every(validPart);
}

/** Splits and validates `org/name`; throws {@link HubDownloadError} explaining the rule otherwise. */
export function parseHubRepoId(repo: string): HubRepoId {
  if (!isHubRepoId(repo)) {
    throw new HubDownloadError(
      `'${repo}' is not a Hugging Face repo id: expected 'org/name' made of letters, digits, '-', '_' and '.' ` +
        `(no '--' or '..', at most 96 characters each)`,
    );
  }
  const [org, name] = repo.split('/') as [string, string];
  return { org, name };
}

/** Validates a revision (branch, tag, commit, `refs/pr/1`); returns it unchanged. */
export function checkRevision(revision: string): string {
  if (revision.length > 200 || !REVISION.test(revision) || revision.split('/').some((p) => p === '.' || p === '..')) {
    throw new HubDownloadError(`'${revision}' is not a valid revision: use a branch, tag or commit made of letters, digits, '-', '_', '.' and '/'`);
  }
  return revision;
}

/** The folder name a revision is stored under: URL-encoded, so `refs/pr/1` stays one segment. */
export function revisionFolder(revision: string): string {
  return encodeURIComponent(revision);
}

/**
 * True for a plain file name that is safe to fetch and to write inside the model folder:
 * no path separators, no `..`, no leading dot, not our own `.partial` suffix.
 */
export function isSafeFileName(name: string): boolean {
  return name.length <= 255 && FILE_NAME.test(name) && !name.includes('..') && !name.endsWith('.partial');
}
