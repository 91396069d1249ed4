import { ConnectorStore, PersistenceError, type PersistenceReason } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Duration, Effect, Layer, Option } from "effect"
import { CliError, describeError } from "./errors.js"
import { DEFAULT_TIMEOUT } from "./options.js"
import { printable } from "./table.js"
import { parseDuration } from "./time.js"

/** Where the CLI's store lives, as the shared options give it. */
export interface DatabaseOptions {
  readonly database: string
  readonly tablePrefix: Option.Option<string>
  /** Seconds the database has to answer a connection. */
  readonly connectTimeout: number
  /** How long the command's work on the store may take once connected (`30s`; `DEFAULT_TIMEOUT` when absent). */
  readonly timeout?: string | undefined
  /** Open the store with `prepareStatements: false` (`--no-prepared-statements`). */
  readonly noPreparedStatements?: boolean | undefined
}

export { CliError, describeError } from "./errors.js"

/** The database as it may be shown: a Postgres URL without its password, every control character escaped. */
export const safeDatabaseLabel = (database: string): string => printable(Sql.redactDatabaseUrl(database))

/** The longest `--timeout` taken: one day. */
const MAX_TIMEOUT_MS = 86_400_000

/**
 * The longest a statement waits for a lock another session holds (Postgres
 * `lock_timeout`, SQLite's busy timeout): the library's default, or half
 * the call bound when that is shorter, so a lock wait ends as such.
 */
const LOCK_WAIT_MS = 10_000

/** How long past `--timeout` the CLI waits for the store's own bound to answer before it stops the command itself. */
const GRACE_MS = 2_000

/** What the checks of `checkedOptions` give: the table names and the call bound. */
interface Checked {
  readonly tables: Sql.TableNames
  readonly timeoutMs: number
}

const lockWaitMs = (timeoutMs: number) => Math.min(LOCK_WAIT_MS, Math.max(1, Math.ceil(timeoutMs / 2)))

/**
 * The connection options the CLI opens the store of `options` with:
 * read-only or not, its work bounded by `timeoutMs`, at most two
 * connections, lock waits bounded within that.
 */
export const storeConnection = (options: DatabaseOptions, readOnly: boolean, timeoutMs: number): Sql.SqlConnection => ({
  url: options.database,
  maxConnections: 2,
  readOnly,
  callTimeoutMs: timeoutMs,
  statementTimeoutMs: timeoutMs,
  lockTimeoutMs: lockWaitMs(timeoutMs),
  busyTimeoutMs: lockWaitMs(timeoutMs),
  connectTimeoutMs: options.connectTimeout * 1000,
  ...(options.noPreparedStatements === true ? { prepareStatements: false } : {}),
  ...Option.match(options.tablePrefix, { onNone: () => ({}), onSome: (tablePrefix) => ({ tablePrefix }) })
})

/**
 * Checks the table prefix, the database URL and the time limits before any
 * connection is tried: a bad one is a clear error naming the flag, not a
 * thrown TypeError or a SQLite file named after a URL.
 */
const checkedOptions = (options: DatabaseOptions): Effect.Effect<Checked, CliError> =>
  Effect.suspend(() => {
    const url = Sql.databaseUrlProblem(options.database)
    if (url !== undefined) return Effect.fail(new CliError({ message: `--database: ${url}` }))
    if (!Number.isSafeInteger(options.connectTimeout) || options.connectTimeout < 1) {
      return Effect.fail(new CliError({ message: `--connect-timeout must be a whole number of seconds, 1 or more; got ${options.connectTimeout}` }))
    }
    const timeout = options.timeout ?? DEFAULT_TIMEOUT
    const timeoutMs = parseDuration(timeout)
    if (timeoutMs === undefined || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) {
      return Effect.fail(new CliError({ message: `--timeout must be a duration from 1ms to 1d, like 30s or 2m; got ${JSON.stringify(timeout)}` }))
    }
    return Effect.try({
      try: () => ({ tables: Sql.tableNames(Option.getOrUndefined(options.tablePrefix)), timeoutMs }),
      catch: (error) => new CliError({ message: `--table-prefix: ${error instanceof Error ? error.message : String(error)}` })
    })
  })

/** What an operator can do about a storage failure of `reason`, for the reasons that call for a person. */
const ADVICE: Partial<Record<PersistenceReason, string>> = {
  "timeout": "it ran past its time limit and nothing of it was kept: look for a long transaction or a held lock " +
    "(pg_stat_activity on Postgres), or give a longer --timeout",
  "lock-timeout": "another session held a lock it needed (pg_stat_activity on Postgres, another process on a SQLite file): " +
    "let that session finish, then run the command again",
  "too-many-connections": "the server has no free connection slot: close idle clients or raise the server's max_connections, " +
    "then run the command again",
  "corrupt": "the database file is damaged: stop every process that uses it, keep a copy, and restore it from a backup " +
    "(sqlite3's .recover can salvage rows from the copy)",
  "database-replaced": "the SQLite file was deleted or replaced while the store had it open, so nothing after that was kept: " +
    "find what removed it, then run the command again"
}

/**
 * One line saying what went wrong in a call on the store at `database`:
 * `describeError`, with every secret of the URL taken out and, for a
 * storage failure that calls for a person, what to do.
 */
export const failureLine = (database: string, error: unknown): string => {
  const line = Sql.redactSecrets(describeError(error), database)
  const advice = error instanceof PersistenceError && error.reason !== undefined ? ADVICE[error.reason] : undefined
  return advice === undefined ? line : `${line}; ${advice}`
}

/** What a failed open means, in one line naming the database. */
const openFailure = (options: DatabaseOptions, error: unknown): CliError => {
  if (error instanceof CliError) return error
  const label = safeDatabaseLabel(options.database)
  if (error instanceof Sql.StoreSchemaNotReady) {
    return new CliError({
      message: error.tablesFound
        ? `${label}: the schema lacks migration${error.missing.length === 1 ? "" : "s"} ${
          error.missing.map((step) => `${step.id} (${step.name})`).join(", ")
        }; connector-store migrate applies ${error.missing.length === 1 ? "it" : "them"}`
        : `no connector-store tables with prefix ${error.tablePrefix} in ${label} (check --table-prefix; connector-store migrate creates them)`
    })
  }
  if (error instanceof PersistenceError && error.reason === "database-missing") {
    return new CliError({ message: `no such database: ${label}` })
  }
  return new CliError({ message: `cannot open database ${label}: ${failureLine(options.database, error)}` })
}

/** Any failure of `effect`, a defect included, as one `CliError` line (see `failureLine`); an interruption stays one. */
const asCliError = <A, E, R>(effect: Effect.Effect<A, E, R>, toError: (error: unknown) => CliError) =>
  Effect.catchAllCause(effect, (cause): Effect.Effect<never, CliError> =>
    Cause.isInterruptedOnly(cause) ? Effect.failCause(cause as Cause.Cause<never>) : Effect.fail(toError(Cause.squash(cause))))

/**
 * Builds `layer` within the connect timeout; a database that does not answer
 * in time, or cannot be opened, is a `CliError` naming it.
 */
const opened = <A>(options: DatabaseOptions, layer: Layer.Layer<A, unknown>) =>
  Effect.gen(function*() {
    const label = safeDatabaseLabel(options.database)
    // Disconnected: a driver stuck in an uninterruptible connect cannot hold
    // the timeout back; it is interrupted in the background.
    return yield* Layer.build(layer).pipe(
      Effect.disconnect,
      Effect.timeoutFail({
        duration: Duration.seconds(options.connectTimeout),
        onTimeout: () =>
          new CliError({ message: `cannot open database ${label}: unreachable: no answer within ${options.connectTimeout}s` })
      }),
      (build) => asCliError(build, (error) => openFailure(options, error))
    )
  })

/**
 * `work` on the store at `options`, bounded: the store's own call bound
 * (`callTimeoutMs`) answers first with a typed failure; should it not,
 * the command is stopped a moment later by this bound, so no lock held by
 * another session and no silent server keeps the command running. Every
 * failure is one `CliError` line.
 */
const bounded = <A, E>(options: DatabaseOptions, timeoutMs: number, work: Effect.Effect<A, E>) =>
  asCliError(work, (error) => new CliError({ message: failureLine(options.database, error) })).pipe(
    Effect.disconnect,
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs + GRACE_MS),
      onTimeout: () =>
        new CliError({
          message: `${safeDatabaseLabel(options.database)}: no answer within ${options.timeout ?? DEFAULT_TIMEOUT} (--timeout); ` +
            "the command was stopped: look for a held lock or a long transaction (pg_stat_activity on Postgres), or give a longer --timeout"
        })
    })
  )

/** The store of `options`, opened read-only or not, for `use`. */
const storeOn = <A, E>(options: DatabaseOptions, readOnly: boolean, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function*() {
    const { timeoutMs } = yield* checkedOptions(options)
    const context = yield* opened(options, Sql.layer(storeConnection(options, readOnly, timeoutMs)))
    return yield* bounded(options, timeoutMs, Effect.flatMap(Effect.provide(ConnectorStore, context), use))
  }))

/**
 * Runs `use` with the store on the database of `options`, opened read-only:
 * nothing is created, migrated or written. A missing database, a table
 * prefix with no tables, or a schema that lacks a migration is a
 * `CliError` saying so.
 */
export const withStoreReadOnly = <A, E>(options: DatabaseOptions, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  storeOn(options, true, use)

/**
 * Runs `use` with the store on the database of `options`, for an action
 * that writes. The database is first checked as `withStoreReadOnly` checks
 * it, so an action never creates a database or a table prefix, nor
 * migrates a schema: only `migrate` does.
 */
export const withStore = <A, E>(options: DatabaseOptions, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.zipRight(storeOn(options, true, () => Effect.void), storeOn(options, false, use))

/** Brings the schema of the database up to date, within `--timeout`, and returns the migration ids it applied. */
export const migrateDatabase = (options: DatabaseOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const { tables, timeoutMs } = yield* checkedOptions(options)
    const context = yield* opened(options, Sql.layerClient(storeConnection(options, false, timeoutMs)))
    const sql = yield* Effect.provide(SqlClient, context)
    return yield* bounded(
      options,
      timeoutMs,
      Sql.migrate(sql, tables).pipe(
        Effect.mapError((error) => new CliError({ message: `migrate failed: ${failureLine(options.database, error)}` }))
      )
    )
  }))
