import { ConnectorStore, PersistenceError } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Data, Duration, Effect, Layer, Option } from "effect"

/** Where the CLI's store lives, as the shared options give it. */
export interface DatabaseOptions {
  readonly database: string
  readonly tablePrefix: Option.Option<string>
  readonly connectTimeout: number
}

/** A failure the CLI reports as one line on stderr, with a non-zero exit. */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

/** The database as it may be shown: a Postgres URL without its password. */
export const safeDatabaseLabel = (database: string): string =>
  Sql.isPostgresUrl(database) ? database.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1:***@") : database

const connection = (options: DatabaseOptions, readOnly: boolean): Sql.SqlConnection => ({
  url: options.database,
  maxConnections: 2,
  readOnly,
  ...Option.match(options.tablePrefix, { onNone: () => ({}), onSome: (tablePrefix) => ({ tablePrefix }) })
})

/**
 * Checks the table prefix and the database URL before any connection is
 * tried: a bad one is a clear error naming the flag, not a thrown TypeError
 * or a SQLite file named after a URL.
 */
const checkedOptions = (options: DatabaseOptions) =>
  Effect.suspend(() => {
    const url = Sql.databaseUrlProblem(options.database)
    if (url !== undefined) return Effect.fail(new CliError({ message: `--database: ${url}` }))
    return Effect.try({
      try: () => Sql.tableNames(Option.getOrUndefined(options.tablePrefix)),
      catch: (error) => new CliError({ message: `--table-prefix: ${error instanceof Error ? error.message : String(error)}` })
    })
  })

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
  return new CliError({ message: `cannot open database ${label}: ${describeError(error)}` })
}

/**
 * Builds `layer` within the connect timeout; a database that does not answer
 * in time, or cannot be opened, is a `CliError` naming it.
 */
const opened = <A>(options: DatabaseOptions, layer: Layer.Layer<A, unknown>) =>
  Effect.gen(function*() {
    yield* checkedOptions(options)
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
      Effect.catchAll((error) => Effect.fail(openFailure(options, error)))
    )
  })

/** The store of `options`, opened read-only or not, for `use`. */
const storeOn = <A, E>(options: DatabaseOptions, readOnly: boolean, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* opened(options, Sql.layer(connection(options, readOnly)))
    return yield* Effect.flatMap(Effect.provide(ConnectorStore, context), use)
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

/** Brings the schema of the database up to date and returns the migration ids it applied. */
export const migrateDatabase = (options: DatabaseOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const tables = yield* checkedOptions(options)
    const context = yield* opened(options, Sql.layerClient(connection(options, false)))
    const sql = yield* Effect.provide(SqlClient, context)
    return yield* Sql.migrate(sql, tables).pipe(
      Effect.mapError((error) => new CliError({ message: `migrate failed: ${describeError(error)}` }))
    )
  }))

/** One line saying what went wrong, from any error the store or the CLI raises. */
export const describeError = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause
    const own = error.message.length > 0 ? error.message : (error as { _tag?: string })._tag ?? "error"
    return (cause instanceof Error && !own.includes(cause.message) ? `${own}: ${cause.message}` : own).replace(/\s*\n\s*/g, " ")
  }
  return String(error)
}
