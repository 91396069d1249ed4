import { ConnectorStore, PersistenceError } from "@connector-store/core"
import * as Sql from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import { randomBytes } from "node:crypto"
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { Effect, Exit, Layer } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { claimInput, KEY } from "./operations.fixtures.js"
import { NOW } from "./support/contract/fixtures.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// Each reason is provoked for real, against the real drivers: the assertions
// check the tag, the classified reason, the public method named, and that
// the driver's own words reach the message.

const rejection = async (promise: Promise<unknown>): Promise<Record<string, unknown> & Error> => {
  try {
    await promise
  } catch (error) {
    return error as Record<string, unknown> & Error
  }
  throw new Error("expected a rejection")
}

const expectPersistence = (error: Record<string, unknown> & Error, method: string, reason: string, driverText: RegExp) => {
  expect(error._tag).toBe("PersistenceError")
  expect(error["reason"]).toBe(reason)
  expect(error["method"]).toBe(method)
  expect(error.message).toMatch(new RegExp(`^${method}: ${reason}: `))
  expect(error.message).toMatch(driverText)
  expect(error.cause).toBeDefined()
}

const withPort = <A>(url: string, port: number) => {
  const u = new URL(url)
  u.port = String(port)
  return u.toString() as A & string
}

describe("driver failures without a code, classified by their words", () => {
  it("pg's refusal of a query on a client whose connection broke or ended is unreachable", () => {
    // What pg says when a statement comes after its backend was terminated and the client has ended.
    for (const message of ["Client was closed and is not queryable", "Client has encountered a connection error and is not queryable"]) {
      expect(Sql.classifyDriverFailure({ code: undefined, message })).toBe("unreachable")
    }
    expect(Sql.classifyDriverFailure({ code: undefined, message: "something else went wrong" })).toBe("unknown")
  })
})

describe("errors that say what happened, on SQLite", () => {
  it("a file in a missing directory is database-missing, naming openConnectorStore", async () => {
    const url = join(dirname(freshSqlitePath()), "no-such-dir", "store.sqlite")
    const error = await rejection(Sql.openConnectorStore({ url }))
    expectPersistence(error, "openConnectorStore", "database-missing", /directory does not exist/)
  })

  it("a path that cannot be opened as a file is unreachable (SQLITE_CANTOPEN)", async () => {
    const dir = join(dirname(freshSqlitePath()), `d${randomBytes(4).toString("hex")}`)
    mkdirSync(dir)
    const error = await rejection(Sql.openConnectorStore({ url: dir }))
    expectPersistence(error, "openConnectorStore", "unreachable", /unable to open database file/)
  })

  it("another connection holding the write lock past the busy timeout is lock-timeout, naming the method", async () => {
    const url = freshSqlitePath()
    const store = await Sql.openConnectorStore({ url, busyTimeoutMs: 50, now: () => NOW })
    const other = new Database(url)
    try {
      other.exec("BEGIN IMMEDIATE")
      const error = await rejection(store.claimOperation(claimInput()))
      expectPersistence(error, "claimOperation", "lock-timeout", /database is locked/)
      other.exec("ROLLBACK")
      // Nothing of the refused call was written.
      expect(await store.getOperation(KEY)).toBeNull()
    } finally {
      other.close()
      await store.close()
    }
  })
})

describe.runIf(pgAvailable)("errors that say what happened, on Postgres", () => {
  it("a closed port is unreachable, naming openConnectorStore", async () => {
    const url = withPort(await pgDatabaseForFile(), 1)
    const error = await rejection(Sql.openConnectorStore({ url }))
    expectPersistence(error, "openConnectorStore", "unreachable", /ECONNREFUSED/)
  })

  it("a database that does not exist is database-missing", async () => {
    const url = new URL(await pgDatabaseForFile())
    url.pathname = `/cs_missing_${randomBytes(4).toString("hex")}`
    const error = await rejection(Sql.openConnectorStore({ url: url.toString() }))
    expectPersistence(error, "openConnectorStore", "database-missing", /database "cs_missing_\w+" does not exist/)
  })

  it("the Effect API's layer fails with the same classified error", async () => {
    const url = withPort(await pgDatabaseForFile(), 1)
    const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(Sql.layer({ url }))))
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
      expect(exit.cause.error).toMatchObject({ _tag: "PersistenceError", reason: "unreachable" })
    } else throw new Error("expected a typed failure")
  })

  describe("on an open store", () => {
    const open = async (query = "", tablePrefix = freshPrefix()) =>
      Sql.openConnectorStore({ url: `${await pgDatabaseForFile()}${query}`, tablePrefix, maxConnections: 2, now: () => NOW })

    // The store refuses over-long ids and NUL at its boundary (the same limits on
    // every adapter), so these driver failures are provoked with raw statements
    // on the same server and passed through the adapter's one classifier.
    const driverError = async (statement: string, values: ReadonlyArray<unknown>): Promise<Error> => {
      const client = new pg.Client({ connectionString: await pgDatabaseForFile() })
      await client.connect()
      try {
        await client.query(statement, [...values])
      } catch (error) {
        return error as Error
      } finally {
        await client.end()
      }
      throw new Error(`expected ${statement} to fail`)
    }
    const classifiedAs = (cause: Error, method: string) =>
      Sql.classified(new PersistenceError({ operation: "operation.insert", cause, method })) as unknown as Record<string, unknown> & Error

    it("an id over the btree index limit: refused at the boundary; the driver's own failure is value-too-large", async () => {
      const store = await open()
      try {
        // Random hex does not compress, so the index row really exceeds the 8191-byte limit.
        const operationID = randomBytes(16_000).toString("hex")
        const refused = await rejection(store.claimOperation(claimInput({ operationID })))
        expect(refused).toMatchObject({ _tag: "InvalidInput", method: "claimOperation", field: "input.operationID" })
        expect(await store.getOperation({ ...KEY, operationID: "op-1" })).toBeNull()
      } finally {
        await store.close()
      }
      const table = `cs_oversize_${randomBytes(4).toString("hex")}`
      await driverError(`CREATE TABLE ${table} (id text PRIMARY KEY)`, []).catch(() => undefined)
      const cause = await driverError(`INSERT INTO ${table} (id) VALUES ($1)`, [randomBytes(16_000).toString("hex")])
      expectPersistence(classifiedAs(cause, "claimOperation"), "claimOperation", "value-too-large", /index row (requires|size)/)
    })

    it("a NUL in a string: refused at the boundary; the driver's own failure is invalid-text", async () => {
      const store = await open()
      try {
        const refused = await rejection(store.claimOperation(claimInput({ operationID: "op\u0000nul" })))
        expect(refused).toMatchObject({ _tag: "InvalidInput", method: "claimOperation", field: "input.operationID" })
      } finally {
        await store.close()
      }
      const cause = await driverError("SELECT $1::text", ["op\u0000nul"])
      expectPersistence(classifiedAs(cause, "claimOperation"), "claimOperation", "invalid-text", /invalid byte sequence for encoding "UTF8": 0x00/)
    })

    it("a row lock held by another connection past lock_timeout is lock-timeout, and the call changes nothing", async () => {
      const tablePrefix = freshPrefix()
      const store = await open("?options=-c%20lock_timeout%3D200", tablePrefix)
      const table = `${tablePrefix}operation`
      const claimed = await store.claimOperation(claimInput())
      if (claimed.outcome !== "claimed") throw new Error(`expected claimed, got ${claimed.outcome}`)
      const other = new pg.Client({ connectionString: await pgDatabaseForFile() })
      await other.connect()
      try {
        await other.query("BEGIN")
        await other.query(`SELECT * FROM ${table} WHERE caller_did = $1 AND operation_id = $2 FOR UPDATE`, [KEY.callerDID, KEY.operationID])
        const before = await store.getOperation(KEY)
        // A write waits for the row lock (a busy claim only reads, and reads take no lock).
        const error = await rejection(store.markOperationSent(KEY, { leaseToken: claimed.lease.token }))
        expectPersistence(error, "markOperationSent", "lock-timeout", /lock timeout/)
        await other.query("ROLLBACK")
        expect(await store.getOperation(KEY)).toEqual(before)
      } finally {
        await other.end()
        await store.close()
      }
    })

    it("the Effect API names the method too", async () => {
      const tablePrefix = freshPrefix()
      const store = await open("?options=-c%20lock_timeout%3D200", tablePrefix)
      const claimed = await store.claimOperation(claimInput())
      if (claimed.outcome !== "claimed") throw new Error(`expected claimed, got ${claimed.outcome}`)
      const other = new pg.Client({ connectionString: await pgDatabaseForFile() })
      await other.connect()
      try {
        await other.query("BEGIN")
        await other.query(`SELECT * FROM ${tablePrefix}operation WHERE caller_did = $1 AND operation_id = $2 FOR UPDATE`, [KEY.callerDID, KEY.operationID])
        const exit = await store.runEffect(Effect.exit(Effect.flatMap(ConnectorStore, (s) =>
          s.markOperationSent(KEY, { leaseToken: claimed.lease.token }))))
        expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined).toMatchObject({
          _tag: "PersistenceError",
          reason: "lock-timeout",
          method: "markOperationSent"
        })
        await other.query("ROLLBACK")
      } finally {
        await other.end()
        await store.close()
      }
    })
  })
})
