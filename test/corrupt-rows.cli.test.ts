import { openConnectorStore } from "@connector-store/sql-adapter"
import Sqlite from "better-sqlite3"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { jsonOf, runCliHere } from "./support/cli/run.js"
import { type CliDatabase, dbArgs } from "./support/cli/seed.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The commands run in this process (`runCliHere`). A row the store
// cannot decode is written with the raw driver; the CLI's lists, `show` and
// `status` must not crash on it, and must show it as corrupt.

const databases: ReadonlyArray<{ readonly name: string; readonly fresh: () => Promise<CliDatabase> }> = [
  { name: "sqlite", fresh: async () => ({ url: freshSqlitePath() }) },
  ...(pgAvailable ? [{ name: "postgres", fresh: async () => ({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix() }) }] : [])
]

/** Runs `statement` on `db` with the raw driver. */
const rawRun = async (db: CliDatabase, statement: string): Promise<void> => {
  if (db.url.startsWith("postgres")) {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      await client.query(statement)
    } finally {
      await client.end()
    }
    return
  }
  const sqlite = new Sqlite(db.url)
  try {
    sqlite.prepare(statement).run()
  } finally {
    sqlite.close()
  }
}

/** Two operations and two sync states, then one of each made corrupt (a JSON column holding text that is not JSON). */
const seedWithCorruptRows = async (db: CliDatabase) => {
  const store = await openConnectorStore({ ...db, maxConnections: 2, readWinner: async () => "w-1" })
  try {
    for (const operationID of ["op-ok", "op-bad"]) {
      const claim = await store.claimOperation(claimInput({ operationID, sourceID: `src-${operationID}`, documentID: `doc-${operationID}` }))
      if (claim.outcome !== "claimed") throw new Error(claim.outcome)
    }
    for (const owner of ["did:owner:ok", "did:owner:bad"]) {
      await store.setSyncState("gcal", owner, { status: "idle", lastSyncedAt: "", entityCount: 0, checkpoint: { page: 1 } })
    }
  } finally {
    await store.close()
  }
  const prefix = db.tablePrefix ?? "kubun_connector_"
  await rawRun(db, `UPDATE ${prefix}operation SET reissue_intent = '{broken' WHERE operation_id = 'op-bad'`)
  await rawRun(db, `UPDATE ${prefix}sync_state SET checkpoint = 'not json' WHERE owner_did = 'did:owner:bad'`)
  return { operation: `${prefix}operation`, syncState: `${prefix}sync_state` }
}

for (const { name, fresh } of databases) {
  // One test per database, each on its own database: the databases' suites run beside each other.
  describe(`the CLI shows rows it cannot decode as corrupt, on ${name}`, { timeout: 600_000, concurrent: true }, () => {
    it("operations, show, sync list and status go on, and mark the corrupt rows", async () => {
      const db = await fresh()
      const tables = await seedWithCorruptRows(db)
      const cli = (...args: ReadonlyArray<string>) => runCliHere([...args, ...dbArgs(db)])

      const table = await cli("operations")
      expect(table.code, table.stderr).toBe(0)
      expect(table.stdout).toMatch(/op-ok/)
      expect(table.stdout).toMatch(new RegExp(`^CORRUPT ${tables.operation} did:caller:1/op-bad: column reissue_intent cannot be decoded: `, "m"))
      const listed = jsonOf<{ operations: Array<{ operationID: string }>; corrupt: Array<Record<string, string>> }>(await cli("operations", "--json"))
      expect(listed.operations.map((row) => row.operationID)).toEqual(["op-ok"])
      expect(listed.corrupt).toEqual([{ table: tables.operation, key: "did:caller:1/op-bad", column: "reissue_intent", detail: expect.any(String) }])

      const shown = await cli("show", "operation", "--caller", "did:caller:1", "--operation", "op-bad")
      expect(shown.code, shown.stderr).toBe(0)
      expect(shown.stdout).toMatch(/^CORRUPT: row did:caller:1\/op-bad of \S+operation cannot be decoded \(column reissue_intent: /m)
      expect(shown.stdout).toMatch(/^reissue_intent:\s+\{broken\s+<- cannot be decoded: /m)
      expect(shown.stdout).toMatch(/^operation_id:\s+op-bad$/m)
      const shownJson = jsonOf<{ corrupt: Record<string, string>; columns: Record<string, unknown> }>(
        await cli("show", "operation", "--json", "--caller", "did:caller:1", "--operation", "op-bad")
      )
      expect(shownJson.corrupt).toMatchObject({ table: tables.operation, key: "did:caller:1/op-bad", column: "reissue_intent" })
      expect(shownJson.columns).toMatchObject({ operation_id: "op-bad", reissue_intent: "{broken" })
      const healthy = await cli("show", "operation", "--caller", "did:caller:1", "--operation", "op-ok")
      expect(healthy.code, healthy.stderr).toBe(0)
      expect(healthy.stdout).toMatch(/^operation:\s+op-ok$/m)

      const sync = await cli("sync", "list")
      expect(sync.code, sync.stderr).toBe(0)
      expect(sync.stdout).toMatch(/did:owner:ok/)
      expect(sync.stdout).toMatch(new RegExp(`^CORRUPT ${tables.syncState} gcal/did:owner:bad: column checkpoint cannot be decoded: `, "m"))
      const syncJson = jsonOf<{ syncStates: Array<{ ownerDID: string }>; corrupt: Array<Record<string, string>> }>(await cli("sync", "list", "--json"))
      expect(syncJson.syncStates.map((row) => row.ownerDID)).toEqual(["did:owner:ok"])
      expect(syncJson.corrupt.map((report) => report["key"])).toEqual(["gcal/did:owner:bad"])

      const status = await cli("status")
      expect(status.code, status.stderr).toBe(0)
      expect(status.stdout).toMatch(new RegExp(`^rows that cannot be decoded:\\s+${tables.operation} 1, ${tables.syncState} 1 `, "m"))
      const statusJson = jsonOf<{ corruptRows: Record<string, number>; operations: Record<string, number> }>(await cli("status", "--json"))
      expect(statusJson.corruptRows).toEqual({ [tables.operation]: 1, [tables.syncState]: 1 })
      expect(statusJson.operations.attempted).toBe(2)
    })
  })
}
