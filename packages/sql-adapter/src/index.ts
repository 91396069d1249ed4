/**
 * SQLite and Postgres adapter of connector-store's repository port, on @effect/sql.
 *
 * @module @connector-store/sql-adapter
 */
export * from "./Tables.js"
export * from "./migrations.js"
export * from "./SqlTransactor.js"
export * from "./SqlWatchRepository.js"
export * from "./SqlOperationRepository.js"
export * from "./SqlRelistRepository.js"
export * from "./SqlSyncStateRepository.js"
export * from "./SqlPendingAuthRepository.js"
export * from "./SqlStore.js"
export * from "./SqlFailure.js"
export * from "./SqlOperatorRepository.js"
export * from "./DatabaseClock.js"
export * from "./openChecks.js"
export * as SqliteConnection from "./SqliteConnection.js"
