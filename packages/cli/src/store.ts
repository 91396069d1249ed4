import { ConnectorStore } from "@connector-store/core"
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

const connection = (options: DatabaseOptions): Sql.SqlConnection => ({
  url: options.database,
  maxConnections: 2,
  ...Option.match(options.tablePrefix, { onNone: () => ({}), onSome: (tablePrefix) => ({ tablePrefix }) })
})

/** Checks the table prefix before any connection is tried: a bad one is a clear error, not a thrown TypeError. */
const checkedPrefix = (options: DatabaseOptions) =>
  Effect.try({
    try: () => Sql.tableNames(Option.getOrUndefined(options.tablePrefix)),
    catch: (error) => new CliError({ message: `--table-prefix: ${error instanceof Error ? error.message : String(error)}` })
  })

/**
 * Builds `layer` within the connect timeout; a database that does not answer
 * in time, or cannot be opened, is a `CliError` naming it.
 */
const opened = <A>(options: DatabaseOptions, layer: Layer.Layer<A, unknown>) =>
  Effect.gen(function*() {
    yield* checkedPrefix(options)
    const label = safeDatabaseLabel(options.database)
    // Disconnected: a driver stuck in an uninterruptible connect cannot hold
    // the timeout back; it is interrupted in the background.
    return yield* Layer.build(layer).pipe(
      Effect.disconnect,
      Effect.timeoutFail({
        duration: Duration.seconds(options.connectTimeout),
        onTimeout: () => new CliError({ message: `database ${label} did not answer within ${options.connectTimeout}s` })
      }),
      Effect.catchAll((error) =>
        Effect.fail(
          error instanceof CliError ? error : new CliError({ message: `cannot open database ${label}: ${describeError(error)}` })
        )
      )
    )
  })

/** Runs `use` with the store on the database of `options` (migrated on open), closing it after. */
export const withStore = <A, E>(options: DatabaseOptions, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* opened(options, Sql.layer(connection(options)))
    return yield* Effect.flatMap(Effect.provide(ConnectorStore, context), use)
  }))

/** Brings the schema of the database up to date and returns the migration ids it applied. */
export const migrateDatabase = (options: DatabaseOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const tables = yield* checkedPrefix(options)
    const context = yield* opened(options, Sql.layerClient(connection(options)))
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
