import { CorruptRow, type CorruptRowReport, formatOperationKey, formatWatchIdentity } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { Command, Options } from "@effect/cli"
import { SqlClient } from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql/Statement"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { databaseOptions, json } from "../options.js"
import { CliError, type DatabaseOptions, describeError, withStoreReadOnly } from "../store.js"
import { operationKeyOf, operationKeyOptions, watchIdentityOf, watchIdentityOptions } from "../target.js"
import { operationFields, operationJson, output, rawRowFields, watchFields, watchJson } from "../views.js"

const found = <A>(what: string, option: Option.Option<A>) =>
  Option.match(option, {
    onNone: () => Effect.fail(new CliError({ message: `no ${what}` })),
    onSome: Effect.succeed
  })

/** Which row a `show` reads raw when the store cannot decode it: its table and its WHERE clause. */
interface RawTarget {
  readonly table: (tables: Sql.TableNames) => string
  readonly where: (sql: SqlClient) => Statement<unknown>
}

/**
 * The stored row of `target` as the driver returns it, every column raw,
 * read on a read-only connection of its own (the store could not decode it).
 */
const rawRowOf = (options: DatabaseOptions, target: RawTarget) =>
  Effect.scoped(Effect.gen(function*() {
    const prefix = Option.getOrUndefined(options.tablePrefix)
    const context = yield* Layer.build(Sql.layerClient({
      url: options.database,
      maxConnections: 1,
      readOnly: true,
      ...(prefix === undefined ? {} : { tablePrefix: prefix })
    }))
    const sql = Context.get(context, SqlClient)
    const rows = yield* sql<Record<string, unknown>>`SELECT * FROM ${sql(target.table(Sql.tableNames(prefix)))} WHERE ${target.where(sql)}`
    return rows[0]
  })).pipe(Effect.mapError((error) => new CliError({ message: `reading the corrupt row raw failed: ${describeError(error)}` })))

/**
 * `read` on the store; when the row it reads cannot be decoded, the row is
 * read raw and printed instead (`rawRowFields`, or JSON with the failure
 * under `corrupt` and the columns under `columns`), and the command ends
 * well: showing the row is what was asked.
 */
const readOrShowRaw = <A, E>(
  options: DatabaseOptions & { readonly json: boolean },
  read: Effect.Effect<A, E | CorruptRow | CliError>,
  target: RawTarget
): Effect.Effect<Option.Option<A>, E | CliError> =>
  Effect.catchIf(
    Effect.map(read, Option.some),
    (error): error is CorruptRow => error instanceof CorruptRow,
    (corrupt) =>
      Effect.flatMap(rawRowOf(options, target), (row) => {
        const report: CorruptRowReport = { table: corrupt.table, key: corrupt.key, column: corrupt.column, detail: corrupt.detail }
        if (row === undefined) return Effect.fail(new CliError({ message: corrupt.message }))
        return Effect.as(output(options.json, () => ({ corrupt: report, columns: row }), () => rawRowFields(row, report)), Option.none())
      })
  ) as Effect.Effect<Option.Option<A>, E | CliError>

/** `show operation`: one operation by its key or node key, with its history fields. */
export const showOperationCommand = Command.make("operation", {
  ...databaseOptions,
  json,
  ...operationKeyOptions,
  nodeKey: Options.text("node-key").pipe(Options.optional, Options.withDescription("The operation's public node key"))
}, (options) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const table = (tables: Sql.TableNames) => tables.operation
    const row = Option.isSome(options.nodeKey)
      ? yield* readOrShowRaw(
        options,
        Effect.flatMap(
          withStoreReadOnly(options, (store) => store.findOperationByNodeKey(options.nodeKey.pipe(Option.getOrThrow))),
          (o) => found(`operation with node key ${Option.getOrThrow(options.nodeKey)}`, o)
        ),
        { table, where: (sql) => sql`node_key = ${Option.getOrThrow(options.nodeKey)}` }
      )
      : yield* Effect.flatMap(operationKeyOf(options), (key) =>
        readOrShowRaw(
          options,
          Effect.flatMap(withStoreReadOnly(options, (store) => store.getOperation(key)), (o) =>
            found(`operation ${formatOperationKey(key)}`, o)),
          { table, where: (sql) => sql`caller_did = ${key.callerDID} AND operation_id = ${key.operationID}` }
        ))
    if (Option.isSome(row)) yield* output(options.json, () => operationJson(row.value), () => operationFields(row.value, now))
  })).pipe(Command.withDescription(
    "Show one operation (by --caller and --operation, or --node-key) with its history fields; a row that cannot be decoded is shown raw"
  ))

/** `show watch`: one watch by its identity or document, with its history fields. */
export const showWatchCommand = Command.make("watch", {
  ...databaseOptions,
  json,
  ...watchIdentityOptions,
  document: Options.text("document").pipe(Options.optional, Options.withDescription("The watched document id"))
}, (options) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const table = (tables: Sql.TableNames) => tables.projectionWatch
    const row = Option.isSome(options.document)
      ? yield* readOrShowRaw(
        options,
        Effect.flatMap(
          withStoreReadOnly(options, (store) => store.getWatchByDocument(Option.getOrThrow(options.document))),
          (o) => found(`watch of document ${Option.getOrThrow(options.document)}`, o)
        ),
        // The corrupt row's identity is in the failure; the document alone may name several watches.
        { table, where: (sql) => sql`document_id = ${Option.getOrThrow(options.document)}` }
      )
      : yield* Effect.flatMap(watchIdentityOf(options), (identity) =>
        readOrShowRaw(
          options,
          Effect.flatMap(withStoreReadOnly(options, (store) => store.getWatch(identity)), (o) =>
            found(`watch ${formatWatchIdentity(identity)}`, o)),
          {
            table,
            where: (sql) =>
              sql`owner_did = ${identity.ownerDID} AND connector_name = ${identity.connectorName} AND model = ${identity.model}
                AND account_key = ${identity.accountKey} AND source_id = ${identity.sourceID}`
          }
        ))
    if (Option.isSome(row)) yield* output(options.json, () => watchJson(row.value), () => watchFields(row.value, now))
  })).pipe(Command.withDescription(
    "Show one watch (by its identity flags, or --document) with its history fields; a row that cannot be decoded is shown raw"
  ))

/** `show`: one operation or watch. */
export const showCommand = Command.make("show").pipe(
  Command.withDescription("Show one operation or watch"),
  Command.withSubcommands([showOperationCommand, showWatchCommand])
)
