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
  if (POSTGRES.test(url)) return postgresUrlProblem(url) ?? { kind: "postgres", url }
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

/** A Postgres URL cut where the driver cuts it: scheme, authority, and what follows. */
const postgresParts = (url: string) => {
  const scheme = POSTGRES.exec(url)![0]
  const rest = url.slice(scheme.length)
  const end = rest.search(/[/?#]/)
  const authority = end < 0 ? rest : rest.slice(0, end)
  const tail = end < 0 ? "" : rest.slice(end)
  const question = tail.indexOf("?")
  const hash = tail.indexOf("#")
  const pathEnd = Math.min(question < 0 ? tail.length : question, hash < 0 ? tail.length : hash)
  const query = question < 0 || (hash >= 0 && hash < question) ? "" : tail.slice(question + 1, hash > question ? hash : undefined)
  return { scheme, authority, tail, path: tail.slice(0, pathEnd), query, fragment: hash < 0 ? "" : tail.slice(hash + 1) }
}

/**
 * Why a Postgres URL cannot be read as its writer meant it: an `@` after
 * the host (in the path, a query parameter's name or the fragment) is a
 * password or user name holding an unencoded `@`, `/`, `?` or `#`. The
 * driver would cut it there and take part of the password for the host or
 * the database name, and print it in its errors; it is refused instead,
 * without repeating any of the URL.
 */
const postgresUrlProblem = (url: string): string | undefined => {
  const { fragment, path, query } = postgresParts(url)
  const atInQueryName = query.split("&").some((pair) => pair.split("=")[0]!.includes("@"))
  if (!path.includes("@") && !fragment.includes("@") && !atInQueryName) return undefined
  return "a postgres:// URL has an @ after its host: percent-encode @, /, ?, # and : in the user name and password (%40, %2F, %3F, %23, %3A)"
}

// Query parameters whose values are secrets (libpq's `password` and `sslpassword`, and any alike).
const SECRET_PARAMETER = /pass|pwd|secret|token/i

/**
 * `url` as it may be printed or logged: a Postgres URL with its password
 * (in the authority or as a `password=` query parameter) replaced by `***`.
 * A URL the driver would misread (see `parseDatabaseUrl`) keeps only what
 * follows its last `@`. A SQLite path or `file:` URI holds no secret and is
 * returned as it is.
 */
export const redactDatabaseUrl = (url: string): string => {
  if (!POSTGRES.test(url)) return url
  const { authority, scheme, tail } = postgresParts(url)
  if (postgresUrlProblem(url) !== undefined) return `${scheme}***@${url.slice(url.lastIndexOf("@") + 1)}`
  const at = authority.lastIndexOf("@")
  const userinfo = at < 0 ? undefined : authority.slice(0, at)
  const colon = userinfo?.indexOf(":") ?? -1
  const shownUser = userinfo === undefined ? "" : colon < 0 ? `${userinfo}@` : `${userinfo.slice(0, colon)}:***@`
  const shownTail = tail.replace(/([?&])([^=&#]*)=([^&#]*)/g, (pair, separator: string, name: string) =>
    SECRET_PARAMETER.test(percentDecoded(name) ?? name) ? `${separator}${name}=***` : pair)
  return `${scheme}${shownUser}${authority.slice(at + 1)}${shownTail}`
}

/**
 * The secrets a store's `url` holds: a Postgres URL's password and any
 * secret query parameter, as written and percent-decoded. Empty for SQLite.
 */
export const databaseUrlSecrets = (url: string): ReadonlyArray<string> => {
  if (!POSTGRES.test(url)) return []
  const { authority, query, scheme } = postgresParts(url)
  // A misread URL's password may run past its authority: up to the URL's last @.
  const userinfo = postgresUrlProblem(url) !== undefined
    ? url.slice(scheme.length, url.lastIndexOf("@"))
    : authority.slice(0, Math.max(authority.lastIndexOf("@"), 0))
  const colon = userinfo.indexOf(":")
  const found: Array<string> = colon < 0 ? [] : [userinfo.slice(colon + 1)]
  for (const pair of query.split("&")) {
    const equals = pair.indexOf("=")
    if (equals >= 0 && SECRET_PARAMETER.test(percentDecoded(pair.slice(0, equals)) ?? pair)) found.push(pair.slice(equals + 1))
  }
  const secrets = new Set<string>()
  for (const secret of found) {
    for (const form of [secret, percentDecoded(secret), percentDecoded(secret.replace(/\+/g, " "))]) {
      if (form !== undefined && form.length > 0) secrets.add(form)
    }
  }
  return Array.from(secrets).sort((a, b) => b.length - a.length)
}

/**
 * `text` (a driver's message, a log line) with every secret of `url` in it
 * replaced by `***`, and the whole URL by its redacted form: what a message
 * about the store's connection may carry to a person or a log.
 */
export const redactSecrets = (text: string, url: string): string => {
  const secrets = databaseUrlSecrets(url)
  if (secrets.length === 0) return text
  let out = text.split(url).join(redactDatabaseUrl(url))
  for (const secret of secrets) out = out.split(secret).join("***")
  return out
}

/** Why `url` cannot be a store's url, or `undefined` when it can (see `parseDatabaseUrl`). */
export const databaseUrlProblem = (url: unknown): string | undefined => {
  if (typeof url !== "string") return undefined
  const target = parseDatabaseUrl(url)
  return typeof target === "string" ? target : undefined
}
