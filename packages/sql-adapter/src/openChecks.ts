import { InvalidInput } from "@connector-store/core"
import { allOptionNames, COMMON_OPEN_OPTIONS, unknownKeyOf } from "@connector-store/core/adapter"
import { CLOCK_SOURCES } from "./DatabaseClock.js"
import type { OpenConnectorStoreOptions, SqlConnection } from "./connection.js"

/** The option names of a SQL connection (`layer`, `layerClient`). */
export const CONNECTION_OPTIONS = allOptionNames<SqlConnection>()([
  "url",
  "tablePrefix",
  "maxConnections",
  "busyTimeoutMs",
  "callTimeoutMs",
  "connectTimeoutMs",
  "statementTimeoutMs",
  "lockTimeoutMs",
  "closeTimeoutMs",
  "checkIntegrityOnOpen",
  "applicationName",
  "prepareStatements",
  "readOnly",
  "failoverDoubtMs",
  "requireSynchronousReplication",
  "generationFile",
  "serverCheckMs"
])

/** The option names of `openConnectorStore`: the connection's, the clock's and the shared ones. */
export const OPEN_OPTIONS = allOptionNames<OpenConnectorStoreOptions>()([
  "url",
  "tablePrefix",
  "maxConnections",
  "busyTimeoutMs",
  "callTimeoutMs",
  "connectTimeoutMs",
  "statementTimeoutMs",
  "lockTimeoutMs",
  "closeTimeoutMs",
  "checkIntegrityOnOpen",
  "applicationName",
  "prepareStatements",
  "readOnly",
  "failoverDoubtMs",
  "requireSynchronousReplication",
  "generationFile",
  "serverCheckMs",
  "clock",
  ...COMMON_OPEN_OPTIONS
])

/** The connection options of `options`, without the Promise store's own (clock, readers, policy, observability). */
export const connectionOf = (options: SqlConnection): SqlConnection => {
  const connection: Record<string, unknown> = {}
  for (const name of CONNECTION_OPTIONS) {
    if (name in options) connection[name] = (options as unknown as Record<string, unknown>)[name]
  }
  return connection as unknown as SqlConnection
}

/**
 * A key of a SQL connection that is no connection option, as the
 * `InvalidInput` that `method` fails with (naming the nearest known one).
 */
export const unknownConnectionOption = (method: string, connection: object): InvalidInput | undefined => {
  const unknown = unknownKeyOf(connection, CONNECTION_OPTIONS, `an option of ${method}`)
  return unknown === undefined ? undefined : new InvalidInput({ method, field: unknown.key, reason: unknown.reason })
}

/** The `application_name` a store's Postgres connections carry when the options name none. */
export const DEFAULT_APPLICATION_NAME = "connector-store"

/**
 * Postgres keeps an `application_name` of at most 63 bytes of printable
 * ASCII; anything else is truncated or rewritten, and the store's
 * connections could no longer be found by the name given.
 */
const applicationNameProblem = (value: unknown): string | undefined =>
  value === undefined
    ? undefined
    : typeof value !== "string"
    ? "must be a string"
    : !/^[\x20-\x7e]{1,63}$/.test(value)
    ? "must be 1 to 63 printable ASCII characters"
    : undefined

const clockProblem = (value: unknown): string | undefined =>
  value === undefined || CLOCK_SOURCES.includes(value as never)
    ? undefined
    : `must be one of ${CLOCK_SOURCES.map((source) => `"${source}"`).join(", ")}`

/**
 * The first problem with the connection options this module owns
 * (`applicationName`, `clock`), as the `InvalidInput` that `method` fails
 * with before anything opens; `undefined` when they are fine.
 */
export const connectionOptionsProblem = (
  method: string,
  options: { readonly applicationName?: unknown; readonly clock?: unknown }
): InvalidInput | undefined => {
  const checks: ReadonlyArray<readonly [string, string | undefined]> = [
    ["applicationName", applicationNameProblem(options.applicationName)],
    ["clock", clockProblem(options.clock)]
  ]
  for (const [field, reason] of checks) {
    if (reason !== undefined) return new InvalidInput({ method, field, reason })
  }
  return undefined
}
