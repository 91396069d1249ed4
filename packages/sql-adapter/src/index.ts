/**
 * SQLite and Postgres adapter of connector-store's repository port, on @effect/sql.
 *
 * @module @connector-store/sql-adapter
 */
import { ConnectorStore, type InvalidInput, type PersistenceError, WinnerReader, type WinnerReaders } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Layer } from "effect"
import { layerPorts, type SqlPorts } from "./SqlStore.js"
import type { StoreSchemaTooNew } from "./schemaCheck.js"
import { Tables } from "./Tables.js"
export * from "./Tables.js"
export * from "./migrations.js"
export * from "./SqlTransactor.js"
export * from "./SqlWatchRepository.js"
export * from "./SqlOperationRepository.js"
export * from "./SqlRelistRepository.js"
export * from "./SqlSyncStateRepository.js"
export * from "./SqlPendingAuthRepository.js"
export * from "./connection.js"
export * from "./SqlStore.js"
export * from "./SqlFailure.js"
export * from "./SqlOperatorRepository.js"
export * from "./DatabaseClock.js"
export * from "./openChecks.js"
export * from "./databaseUrl.js"
export * from "./schemaCheck.js"
export * from "./ServerHistory.js"
export * as SqliteConnection from "./SqliteConnection.js"

/**
 * The whole store on the app's own `SqlClient` (a `PgClient` of
 * `@effect/sql-pg`, the stock `SqliteClient` of `@effect/sql-sqlite-node`,
 * or the project's), for the Effect API: the schema is migrated when the
 * layer builds, then `ConnectorStore` and the ports run every statement on
 * that client. Inside the app's `sql.withTransaction(…)` a store call joins
 * the app's transaction (a savepoint of it), so a document write and the
 * operation it claims commit together or not at all. A schema a newer
 * version migrated fails the layer with `StoreSchemaTooNew`. The app keeps owning
 * the client: closing the store's layer does not close it.
 */
export const layerOnClient = (
  readers: WinnerReaders = {},
  options: { readonly tablePrefix?: string | undefined } = {}
): Layer.Layer<ConnectorStore | SqlPorts | WinnerReader, PersistenceError | InvalidInput | StoreSchemaTooNew, SqlClient> =>
  ConnectorStore.layer.pipe(
    Layer.provideMerge(layerPorts),
    Layer.provideMerge(Layer.succeed(WinnerReader, readers)),
    Layer.provideMerge(Tables.layer(options.tablePrefix))
  )
