import { ConnectorStore, WinnerReader } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import { SqliteClient } from "@effect/sql-sqlite-node"
import Database from "better-sqlite3"
import { randomBytes } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// A database that refuses writes, and a file that is no database, each
// provoked for real. Tests run as root, where a chmod 0444 file stays
// writable, so the read-only SQLite file is SQLite's own read-only open
// (the driver's `readonly` flag, through the stock client the store
// supports), and the read-only Postgres database one whose transactions
// default to read-only.

const rejection = async (promise: Promise<unknown>): Promise<Record<string, unknown> & Error> => {
  try {
    await promise
  } catch (error) {
    return error as Record<string, unknown> & Error
  }
  throw new Error("expected a rejection")
}

/**
 * The store's Effect layer over SQLite's read-only open of `filename` (a
 * read-only connection cannot switch the journal to WAL, so it is left as
 * it is).
 */
const readOnlySqliteStore = (filename: string) =>
  ConnectorStore.layer.pipe(
    Layer.provideMerge(Sql.layerPorts),
    Layer.provideMerge(Layer.succeed(WinnerReader, {})),
    Layer.provideMerge(Sql.Tables.layer()),
    Layer.provideMerge(SqliteClient.layer({ filename, readonly: true, disableWAL: true }))
  )

describe("the classification of read-only and not-a-database failures", () => {
  it("SQLite's read-only codes and Postgres' read-only transaction are read-only; SQLITE_NOTADB is not-a-database", () => {
    for (const code of ["SQLITE_READONLY", "SQLITE_READONLY_DBMOVED", "SQLITE_READONLY_DIRECTORY", "25006"]) {
      expect(Sql.classifyDriverFailure({ code, message: "attempt to write a readonly database" })).toBe("read-only")
    }
    expect(Sql.classifyDriverFailure({ code: "SQLITE_NOTADB", message: "file is not a database" })).toBe("not-a-database")
  })
})

describe("a SQLite file that refuses writes, or is no database", () => {
  const prepared = [
    ["an empty file, where the store must create its tables", (file: string) => new Database(file).close()],
    ["a migrated store, whose migration check takes the write lock", async (file: string) => {
      await (await Sql.openConnectorStore({ url: file })).close()
    }]
  ] as const
  for (const [label, prepare] of prepared) {
    it(`opening ${label}, through SQLite's read-only open, fails with reason read-only and writes nothing`, async () => {
      const file = freshSqlitePath()
      await prepare(file)
      const before = readFileSync(file)
      const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(readOnlySqliteStore(file))))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      expect(error).toMatchObject({ _tag: "PersistenceError", reason: "read-only", operation: "migrate" })
      expect((error as Error).message).toMatch(/^migrate: read-only: attempt to write a readonly database/)
      expect(readFileSync(file).equals(before)).toBe(true)
    })
  }

  it("a file of random bytes is not-a-database, naming openConnectorStore, and the file is left as it was", async () => {
    const file = freshSqlitePath()
    const bytes = randomBytes(8_192)
    writeFileSync(file, bytes)
    const error = await rejection(Sql.openConnectorStore({ url: file }))
    expect(error).toMatchObject({ _tag: "PersistenceError", reason: "not-a-database", method: "openConnectorStore" })
    expect(error.message).toMatch(/^openConnectorStore: not-a-database: file is not a database/)
    expect(readFileSync(file).equals(bytes)).toBe(true)
  })
})

describe.runIf(pgAvailable)("a Postgres database that refuses writes", () => {
  it("opening a store on a database whose transactions are read-only fails with reason read-only", async () => {
    const url = await pgDatabaseForFile()
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    try {
      await admin.query(`ALTER DATABASE ${new URL(url).pathname.slice(1)} SET default_transaction_read_only = on`)
    } finally {
      await admin.end()
    }
    const error = await rejection(Sql.openConnectorStore({ url, tablePrefix: "readonly_" }))
    expect(error).toMatchObject({ _tag: "PersistenceError", reason: "read-only", method: "openConnectorStore" })
    expect(error.message).toMatch(/read-only transaction/)
  })
})
