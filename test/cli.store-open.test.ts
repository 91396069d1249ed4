import { createHash } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { openConnectorStore, StoreSchemaNotReady } from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { freshSqlitePath } from "./support/databases.js"

// The read-only open the CLI's inspections stand on, through the library.

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex")
const rejection = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error)

describe("openConnectorStore with readOnly", () => {
  it("a missing file is database-missing and is not created", async () => {
    const path = freshSqlitePath()
    expect(await rejection(openConnectorStore({ url: path, readOnly: true }))).toMatchObject({
      _tag: "PersistenceError",
      reason: "database-missing",
      method: "openConnectorStore"
    })
    expect(existsSync(path)).toBe(false)
  })

  it("reads a migrated store, refuses every write, and leaves the file as it was", async () => {
    const path = freshSqlitePath()
    await (await openConnectorStore({ url: path })).close()
    const before = sha256(path)
    const store = await openConnectorStore({ url: path, readOnly: true })
    try {
      expect((await store.getStoreStatus()).operations.attempted).toBe(0)
      expect(await rejection(store.setSyncState("gcal", "did:owner:1", { status: "idle", lastSyncedAt: "", entityCount: 0 })))
        .toMatchObject({ _tag: "PersistenceError" })
    } finally {
      await store.close()
    }
    expect(sha256(path)).toBe(before)
  })

  it("an unknown prefix and a missing migration are StoreSchemaNotReady, and nothing is created", async () => {
    const path = freshSqlitePath()
    await (await openConnectorStore({ url: path })).close()
    const before = sha256(path)
    const unknown = await rejection(openConnectorStore({ url: path, readOnly: true, tablePrefix: "other_" }))
    expect(unknown).toBeInstanceOf(StoreSchemaNotReady)
    expect(unknown).toMatchObject({ tablePrefix: "other_", tablesFound: false, method: "openConnectorStore" })
    expect(sha256(path)).toBe(before)
    const { default: Sqlite } = await import("better-sqlite3")
    const raw = new Sqlite(path)
    raw.prepare("DELETE FROM kubun_connector_schema_migrations WHERE id IN (6, 7)").run()
    raw.close()
    const older = await rejection(openConnectorStore({ url: path, readOnly: true }))
    expect(older).toMatchObject({
      _tag: "StoreSchemaNotReady",
      tablesFound: true,
      missing: [{ id: 6, name: "operation_in_doubt" }, { id: 7, name: "retention_partition_indexes" }]
    })
    expect(String((older as Error).message)).toMatch(/lacks migrations 6 \(operation_in_doubt\), 7 \(retention_partition_indexes\)/)
  })

  it("a URL of an unknown scheme is InvalidInput naming options.url; a file: URI with mode=ro opens read-only", async () => {
    expect(await rejection(openConnectorStore({ url: "mysql://db/store" }))).toMatchObject({ _tag: "InvalidInput", field: "options.url" })
    const path = freshSqlitePath()
    await (await openConnectorStore({ url: path })).close()
    const before = sha256(path)
    const store = await openConnectorStore({ url: `file://${path}?mode=ro` })
    try {
      expect(await rejection(store.setSyncState("gcal", "did:owner:1", { status: "idle", lastSyncedAt: "", entityCount: 0 })))
        .toMatchObject({ _tag: "PersistenceError" })
    } finally {
      await store.close()
    }
    expect(sha256(path)).toBe(before)
  })
})
