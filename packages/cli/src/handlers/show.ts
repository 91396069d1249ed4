import { type ConnectorStore, CorruptRow, type CorruptRowReport, formatOperationKey, formatWatchIdentity } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql/Statement"
import { Clock, Context, Effect, Either, Layer, Option } from "effect"
import { CliError, type DatabaseOptions, describeError, withStoreReadOnly } from "../store.js"
import { operationKeyOf, watchIdentityOf } from "../target.js"
import { operationFields, operationJson, output, quietly, rawRowFields, watchFields, watchJson } from "../views.js"

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
 * Reads one row with `read` on the store opened read-only. When the store
 * cannot decode the row, it is read raw and printed instead
 * (`rawRowFields`, or JSON with the failure under `corrupt` and the
 * columns under `columns`) and the answer is none: showing the row is what
 * was asked, so the command ends well. `what` names the row when there is none.
 */
const readOrShowRaw = <A, E>(
  options: DatabaseOptions & { readonly json: boolean },
  what: string,
  read: (store: ConnectorStore["Type"]) => Effect.Effect<Option.Option<A>, E>,
  target: RawTarget
): Effect.Effect<Option.Option<A>, CliError> =>
  Effect.gen(function*() {
    // The store's warning about the row is not printed: the command shows the row itself.
    const answer = yield* withStoreReadOnly(options, (store) =>
      Effect.catchIf(
        Effect.map(quietly(read(store)), Either.right),
        (error): error is CorruptRow & E => error instanceof CorruptRow,
        (corrupt) => Effect.succeed(Either.left(corrupt))
      ))
    if (Either.isRight(answer)) {
      if (Option.isNone(answer.right)) return yield* new CliError({ message: `no ${what}` })
      return answer.right
    }
    const corrupt = answer.left
    const row = yield* rawRowOf(options, target)
    if (row === undefined) return yield* new CliError({ message: corrupt.message })
    const report: CorruptRowReport = { table: corrupt.table, key: corrupt.key, column: corrupt.column, detail: corrupt.detail }
    yield* output(options.json, () => ({ corrupt: report, columns: row }), () => rawRowFields(row, report))
    return Option.none()
  })

/** The options of a `show`: where the store is and `--json`. */
type ShowOptions = DatabaseOptions & { readonly json: boolean }

/** `show operation`: one operation by its key or node key, with its history fields. */
export const operation = (options: ShowOptions & {
  readonly caller: Option.Option<string>
  readonly operation: Option.Option<string>
  readonly nodeKey: Option.Option<string>
}) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const table = (tables: Sql.TableNames) => tables.operation
    const row = Option.isSome(options.nodeKey)
      ? yield* readOrShowRaw(
        options,
        `operation with node key ${options.nodeKey.value}`,
        (store) => store.findOperationByNodeKey(Option.getOrThrow(options.nodeKey)),
        { table, where: (sql) => sql`node_key = ${Option.getOrThrow(options.nodeKey)}` }
      )
      : yield* Effect.flatMap(operationKeyOf(options), (key) =>
        readOrShowRaw(
          options,
          `operation ${formatOperationKey(key)}`,
          (store) => store.getOperation(key),
          { table, where: (sql) => sql`caller_did = ${key.callerDID} AND operation_id = ${key.operationID}` }
        ))
    if (Option.isSome(row)) yield* output(options.json, () => operationJson(row.value), () => operationFields(row.value, now))
  })

/** `show watch`: one watch by its identity or document, with its history fields. */
export const watch = (options: ShowOptions & {
  readonly owner: Option.Option<string>
  readonly connector: Option.Option<string>
  readonly model: Option.Option<string>
  readonly account: Option.Option<string>
  readonly source: Option.Option<string>
  readonly document: Option.Option<string>
}) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const table = (tables: Sql.TableNames) => tables.projectionWatch
    const row = Option.isSome(options.document)
      ? yield* readOrShowRaw(
        options,
        `watch of document ${options.document.value}`,
        (store) => store.getWatchByDocument(Option.getOrThrow(options.document)),
        // The corrupt row's identity is in the failure; the document alone may name several watches.
        { table, where: (sql) => sql`document_id = ${Option.getOrThrow(options.document)}` }
      )
      : yield* Effect.flatMap(watchIdentityOf(options), (identity) =>
        readOrShowRaw(
          options,
          `watch ${formatWatchIdentity(identity)}`,
          (store) => store.getWatch(identity),
          {
            table,
            where: (sql) =>
              sql`owner_did = ${identity.ownerDID} AND connector_name = ${identity.connectorName} AND model = ${identity.model}
                AND account_key = ${identity.accountKey} AND source_id = ${identity.sourceID}`
          }
        ))
    if (Option.isSome(row)) yield* output(options.json, () => watchJson(row.value), () => watchFields(row.value, now))
  })
