import { ConnectorStore, type PersistenceError, type StorePorts, type StoreSnapshot, WinnerReader, type WinnerReaders } from "@connector-store/core"
import * as Memory from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { Layer } from "effect"
import { freshPrefix, freshSqlitePath, PG_ADMIN_URL, pgAvailable, pgDatabaseForFile } from "./databases.js"
import { withoutDirect } from "./direct.js"
import { layerWithPrefix } from "./pgPrefixes.js"

/** Everything a contract test can reach on a store. */
export type StoreServices = ConnectorStore | StorePorts | StoreSnapshot

/** One adapter under test: builds a fresh, empty store per layer build. */
export interface AdapterUnderTest {
  readonly name: "memory" | "sqlite" | "postgres"
  /** A fresh, empty store whose winners are read by `readers`. */
  readonly layer: (readers: WinnerReaders) => Layer.Layer<StoreServices, PersistenceError>
  /** A fresh connection for the Promise API (SQL adapters): URL and table prefix. */
  readonly connection: () => Promise<{ readonly url: string; readonly tablePrefix?: string }>
}

/** A SQL store layer; the harness's options are always valid, so an `InvalidInput` would be a bug here (a defect). */
const sqlLayer = (...args: Parameters<typeof Sql.layer>): Layer.Layer<StoreServices, PersistenceError> =>
  Layer.catchAll(Sql.layer(...args), (error) => error._tag === "PersistenceError" ? Layer.fail(error) : Layer.die(error))

const memory: AdapterUnderTest = {
  name: "memory",
  layer: (readers) => Memory.layer(readers),
  connection: async () => ({ url: "memory" })
}

const sqlite: AdapterUnderTest = {
  name: "sqlite",
  layer: (readers) => sqlLayer({ url: freshSqlitePath() }, readers),
  connection: async () => ({ url: freshSqlitePath() })
}

/**
 * SQLite over the stock `@effect/sql-sqlite-node` client, as a user who
 * brings their own provides it (`layerPorts` over an ambient `SqlClient`).
 * Only its Effect layer is on the stock client: `openConnectorStore`
 * always opens the project's.
 */
export const stockSqliteAdapter: AdapterUnderTest = {
  name: "sqlite",
  layer: (readers) =>
    ConnectorStore.layer.pipe(
      Layer.provideMerge(Layer.catchAll(Sql.layerPorts, (error) => error._tag === "PersistenceError" ? Layer.fail(error) : Layer.die(error))),
      Layer.provideMerge(Layer.succeed(WinnerReader, readers)),
      Layer.provideMerge(Layer.orDie(Sql.Tables.layer())),
      Layer.provideMerge(Sql.layerStockSqliteClient(freshSqlitePath()))
    ),
  connection: async () => ({ url: freshSqlitePath() })
}

/**
 * The memory adapter with its `DirectDatabase` left out, so the Effect API
 * runs every hot method on the ports (the default memory adapter runs them
 * on its direct rows whenever the database is free).
 */
export const memoryPortsAdapter: AdapterUnderTest = {
  name: "memory",
  layer: (readers) => ConnectorStore.layer.pipe(Layer.provideMerge(Layer.merge(withoutDirect(Memory.layerPorts), Layer.succeed(WinnerReader, readers)))),
  connection: async () => ({ url: "memory" })
}

/** The one adapter `adaptersUnderTest` answers in this test file, when a file chose one. */
let only: AdapterUnderTest | undefined

/** Starts a test file with every adapter under test (see `perFile.ts`: a worker keeps this module loaded between files). */
export const startTestFileAdapters = (): void => {
  only = undefined
}

/**
 * From now on in this test file, `adaptersUnderTest` answers the stock-client
 * SQLite adapter alone: a file calls it, then imports the suites it re-runs
 * on that client (see sqlite-stock-client.test.ts).
 */
export const useStockSqliteOnly = (): void => {
  only = stockSqliteAdapter
}

/**
 * From now on in this test file, `adaptersUnderTest` answers the memory
 * adapter without its direct rows alone (`memoryPortsAdapter`; see
 * memory-ports.test.ts).
 */
export const useMemoryPortsOnly = (): void => {
  only = memoryPortsAdapter
}

/**
 * Postgres: one database per test file, one table prefix per store layer
 * (an earlier test's, emptied, where one is ready: see `layerWithPrefix`).
 */
export const postgresAdapter = async (): Promise<AdapterUnderTest> => {
  const url = await pgDatabaseForFile()
  return {
    name: "postgres",
    layer: (readers) => layerWithPrefix(url, (tablePrefix) => sqlLayer({ url, tablePrefix, maxConnections: 8 }, readers)),
    connection: async () => ({ url, tablePrefix: freshPrefix() })
  }
}

/**
 * Postgres when no server answered: its suites are still declared, so that
 * they are reported as skipped (`skipPostgresSuites`) and counted at the end
 * of the run; were one to run anyway, it fails instead of passing.
 */
const absentPostgres: AdapterUnderTest = {
  name: "postgres",
  layer: () => Layer.die(new Error(`no Postgres server at ${PG_ADMIN_URL}`)),
  connection: () => Promise.reject(new Error(`no Postgres server at ${PG_ADMIN_URL}`))
}

/**
 * The adapters every contract suite runs against: memory, SQLite on a temp
 * file, and Postgres on the local server (its suites skipped and counted in
 * the run's summary when it is absent, an error in CI).
 */
export const adaptersUnderTest = async (): Promise<ReadonlyArray<AdapterUnderTest>> =>
  only !== undefined ? [only] : [memory, sqlite, pgAvailable ? await postgresAdapter() : absentPostgres]
