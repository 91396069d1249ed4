import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { clockSourceOf, openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { claimFor, rejectionOf, withClient } from "./faults.support.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const badOptions: ReadonlyArray<readonly [string, string, Record<string, unknown>]> = [
  ["an empty application name", "applicationName", { applicationName: "" }],
  ["an application name of 64 characters", "applicationName", { applicationName: "a".repeat(64) }],
  ["a non-ASCII application name", "applicationName", { applicationName: "connector-störe" }],
  ["an application name with a newline", "applicationName", { applicationName: "connector\nstore" }],
  ["an application name that is not a string", "applicationName", { applicationName: 7 }],
  ["an unknown clock source", "clock", { clock: "server" }],
  ["a clock source that is not a string", "clock", { clock: true }]
]

describe("the open options of the SQL store's time and connections", () => {
  for (const [label, field, bad] of badOptions) {
    it(`openConnectorStore refuses ${label} with InvalidInput naming ${field}, opening nothing`, async () => {
      const file = freshSqlitePath()
      const error = await rejectionOf(openConnectorStore({ url: file, ...bad } as never))
      expect(error).toMatchObject({ _tag: "InvalidInput", method: "openConnectorStore", field })
      expect(existsSync(file)).toBe(false)
    })
  }

  it("the Effect layer refuses a bad option as a PersistenceError whose cause names it, opening nothing", async () => {
    const file = freshSqlitePath()
    const error = await Effect.runPromise(Effect.flip(Layer.build(Sql.layerClient({ url: file, applicationName: "" })).pipe(Effect.scoped)))
    expect(error).toMatchObject({ _tag: "PersistenceError", cause: { _tag: "InvalidInput", field: "applicationName" } })
    expect(existsSync(file)).toBe(false)
  })

  it("an application name of 63 printable characters is accepted", async () => {
    const store = await openConnectorStore({ url: freshSqlitePath(), applicationName: `${"a".repeat(62)}~` })
    await store.close()
  })

  it("the clock follows the database on Postgres unless a machine clock is injected or another source named", () => {
    const now = () => 0
    expect(clockSourceOf(true, {})).toBe("database")
    expect(clockSourceOf(true, { now })).toBe("local")
    expect(clockSourceOf(true, { now, clock: "database" })).toBe("database")
    expect(clockSourceOf(true, { clock: "local" })).toBe("local")
    expect(clockSourceOf(false, {})).toBe("local")
    expect(clockSourceOf(false, { clock: "database" })).toBe("local")
  })

  it("store.now() is the clock a SQLite or memory store decides with: the injected one", async () => {
    let machine = 5_000_000
    const now = () => machine
    const sqlite = await openConnectorStore({ url: freshSqlitePath(), now })
    const memory = openMemoryConnectorStore({ now })
    try {
      for (const store of [sqlite, memory]) {
        expect(store.now()).toBe(5_000_000)
        const claim = await store.claimOperation(claimFor("timed", { leaseMs: 1_000 }))
        expect(claim).toMatchObject({ outcome: "claimed", lease: { expiresAt: 5_001_000 } })
      }
      machine = 5_000_500
      expect(sqlite.now()).toBe(5_000_500)
      expect(memory.now()).toBe(5_000_500)
    } finally {
      await sqlite.close()
      await memory.close()
    }
  })

  it.runIf(pgAvailable)("a Postgres store's connections carry application_name connector-store by default", async () => {
    const url = await pgDatabaseForFile()
    const store = await openConnectorStore({ url, tablePrefix: freshPrefix(), maxConnections: 1 })
    try {
      await store.getOperation({ callerDID: "did:caller:x", operationID: "none" })
      const { rows } = await withClient(url, (admin) =>
        admin.query<{ name: string }>(
          "SELECT DISTINCT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ))
      expect(rows.map((row) => row.name)).toEqual(["connector-store"])
    } finally {
      await store.close()
    }
  })
})
