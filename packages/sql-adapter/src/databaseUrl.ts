/**
 * What a store's `url` names: a Postgres server, or a SQLite database (a
 * file path, `:memory:`, or a SQLite `file:` URI, read as SQLite reads one).
 */
export type DatabaseTarget =
  | { readonly kind: "postgres"; readonly url: string }
  | {
    readonly kind: "sqlite"
    /** The file's path, or `:memory:`. */
    readonly filename: string
    /**
     * `rwc`: read, write, create when missing (a plain path); `rw`: the file
     * must exist; `ro`: the file must exist and is opened read-only;
     * `memory`: a private in-memory database.
     */
    readonly mode: "rwc" | "rw" | "ro" | "memory"
  }

const POSTGRES = /^postgres(ql)?:\/\//

// A scheme as RFC 3986 spells one, two characters at least (so `C://x` stays a Windows path).
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]+):\/\//

const percentDecoded = (text: string): string | undefined => {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

const FILE_MODES = ["ro", "rw", "rwc", "memory"] as const

/**
 * A SQLite `file:` URI as SQLite reads one (https://www.sqlite.org/uri.html):
 * an authority, if any, empty or `localhost`; the path percent-decoded;
 * `mode=ro|rw|rwc|memory` and `cache=private` honoured. Any other parameter
 * is refused rather than silently dropped: the driver could not apply it.
 */
const parseFileUri = (url: string): DatabaseTarget | string => {
  let rest = url.slice("file:".length)
  const hash = rest.indexOf("#")
  if (hash >= 0) rest = rest.slice(0, hash)
  const question = rest.indexOf("?")
  const query = question >= 0 ? rest.slice(question + 1) : ""
  let rawPath = question >= 0 ? rest.slice(0, question) : rest
  if (rawPath.startsWith("//")) {
    const slash = rawPath.indexOf("/", 2)
    const authority = slash >= 0 ? rawPath.slice(2, slash) : rawPath.slice(2)
    if (authority !== "" && authority !== "localhost") {
      return `a file: URI names a file on this machine; its authority must be empty or localhost, got "${authority}"`
    }
    rawPath = slash >= 0 ? rawPath.slice(slash) : ""
  }
  const filename = percentDecoded(rawPath)
  if (filename === undefined) return `a file: URI's path has a bad %-escape: "${rawPath}"`
  let mode: (typeof FILE_MODES)[number] = "rwc"
  for (const pair of query.split("&").filter((part) => part.length > 0)) {
    const equals = pair.indexOf("=")
    const key = percentDecoded(equals >= 0 ? pair.slice(0, equals) : pair)
    const value = percentDecoded(equals >= 0 ? pair.slice(equals + 1) : "")
    if (key === undefined || value === undefined) return `a file: URI's query has a bad %-escape: "${pair}"`
    if (key === "mode") {
      if (!FILE_MODES.includes(value as never)) return `a file: URI's mode must be one of ${FILE_MODES.join(", ")}, got "${value}"`
      mode = value as (typeof FILE_MODES)[number]
    } else if (key === "cache" && value === "private") {
      continue
    } else {
      return `the file: URI parameter "${key}" is not supported (mode=ro|rw|rwc|memory and cache=private are)`
    }
  }
  if (mode === "memory" || filename === ":memory:") return { kind: "sqlite", filename: ":memory:", mode: "memory" }
  if (filename === "") return "a file: URI must name a file (an empty one would be a temporary database)"
  return { kind: "sqlite", filename, mode }
}

/**
 * What `url` names, or why it names nothing this store opens: a scheme
 * other than `postgres://`, `postgresql://` and `file:` is refused by name
 * (`mysql://…`, a mistyped `postgress://…`), never taken for a file path.
 */
export const parseDatabaseUrl = (url: string): DatabaseTarget | string => {
  if (POSTGRES.test(url)) return { kind: "postgres", url }
  if (url === "" || url === ":memory:") return { kind: "sqlite", filename: ":memory:", mode: "memory" }
  if (url.startsWith("file:")) return parseFileUri(url)
  const scheme = SCHEME.exec(url)?.[1]
  if (scheme === undefined) return { kind: "sqlite", filename: url, mode: "rwc" }
  const lower = scheme.toLowerCase()
  if (lower === "sqlite" || lower === "sqlite3") {
    return `a ${scheme}:// URL is not taken: give the SQLite file's path, or a file: URI (file:///path/to/store.sqlite)`
  }
  const hint = /^p(ostg|g|sql)/.test(lower) ? " (did you mean postgres://?)" : ""
  return `the URL scheme "${scheme}://" is not supported${hint}: give a SQLite file path, a file: URI, or a postgres:// URL`
}

/** Why `url` cannot be a store's url, or `undefined` when it can (see `parseDatabaseUrl`). */
export const databaseUrlProblem = (url: unknown): string | undefined => {
  if (typeof url !== "string") return undefined
  const target = parseDatabaseUrl(url)
  return typeof target === "string" ? target : undefined
}
