import { ConnectorStore, type CorruptRowReport, type PromiseConnectorStore, StoreMetrics } from "@connector-store/core"
import { openConnectorStore, type SqlTransaction } from "@connector-store/sql-adapter"
import Sqlite from "better-sqlite3"
import { Cause, Effect, Exit, Metric, Option } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { NOW } from "./support/contract/fixtures.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// A row the store cannot decode (a JSON column holding text that is not
// JSON; on SQLite, text in an integer column) is written with the raw
// driver, beside healthy rows. A call that addresses it fails with
// CorruptRow naming table, key and column, and writes nothing; list calls
// and sweeps return every healthy row and report the corrupt one.

/** A store's database as the raw driver reaches it. */
interface Raw {
  readonly run: (statement: string) => Promise<void>
  readonly rows: (statement: string) => Promise<ReadonlyArray<Record<string, unknown>>>
  readonly close: () => Promise<void>
}

interface Database {
  readonly name: "sqlite" | "postgres"
  readonly url: string
  readonly tablePrefix: string
  readonly raw: () => Promise<Raw>
}

const sqliteDatabase = (): Database => {
  const url = freshSqlitePath()
  return {
    name: "sqlite",
    url,
    tablePrefix: "kubun_connector_",
    raw: async () => {
      const db = new Sqlite(url)
      db.pragma("busy_timeout = 5000")
      return {
        run: async (statement) => void db.prepare(statement).run(),
        rows: async (statement) => db.prepare(statement).all() as ReadonlyArray<Record<string, unknown>>,
        close: async () => void db.close()
      }
    }
  }
}

const postgresDatabase = async (): Promise<Database> => {
  const url = await pgDatabaseForFile()
  return {
    name: "postgres",
    url,
    tablePrefix: freshPrefix(),
    raw: async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      return {
        run: async (statement) => void await client.query(statement),
        rows: async (statement) => (await client.query(statement)).rows as ReadonlyArray<Record<string, unknown>>,
        close: () => client.end()
      }
    }
  }
}

const databases: ReadonlyArray<{ readonly name: string; readonly fresh: () => Promise<Database> }> = [
  { name: "sqlite", fresh: async () => sqliteDatabase() },
  ...(pgAvailable ? [{ name: "postgres", fresh: postgresDatabase }] : [])
]

type Store = PromiseConnectorStore<SqlTransaction>

/** A store on `db` with the clock at NOW, and its raw driver, for `body`. */
const withStore = async (db: Database, body: (store: Store, raw: Raw) => Promise<void>): Promise<void> => {
  const store: Store = await openConnectorStore({
    url: db.url,
    tablePrefix: db.tablePrefix,
    now: () => NOW,
    readWinner: async () => "w-1"
  })
  const raw = await db.raw()
  try {
    await body(store, raw)
  } finally {
    await raw.close()
    await store.close()
  }
}

/** The rejection of `promise` (fails the test when it resolves). */
const rejectionOf = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error("expected a rejection")
}

/** The typed failure of an Effect-API call on `store`. */
const effectFailureOf = async <A, E>(store: Store, use: (api: ConnectorStore["Type"]) => Effect.Effect<A, E>) => {
  const exit = await store.runEffect(Effect.exit(Effect.flatMap(ConnectorStore, use)))
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  return Option.getOrUndefined(Cause.failureOption(exit.cause))
}

const operationKey = (operationID: string) => ({ callerDID: "did:caller:1", operationID })

/** Claims `operationID` (attempted, due at once) and gives its lease back, as a runner that failed would. */
const claimDue = async (store: Store, operationID: string): Promise<void> => {
  const claim = await store.claimOperation(claimInput({ operationID, sourceID: `src-${operationID}`, documentID: `doc-${operationID}` }))
  if (claim.outcome !== "claimed") throw new Error(`claim of ${operationID} was ${claim.outcome}`)
  const failed = await store.recordAttemptFailure(operationKey(operationID), {
    leaseToken: claim.lease.token,
    kind: "retryable",
    httpStatus: 429
  })
  if (failed.outcome === "dead") throw new Error(`${operationID} died`)
}

/** Commits an operation on `doc-<sourceID>` for `sourceID`, which arms its watch (due 5 s after NOW). */
const committedWithWatch = async (store: Store, sourceID: string): Promise<void> => {
  const operationID = `op-${sourceID}`
  const claim = await store.claimOperation(claimInput({ operationID, sourceID, documentID: `doc-${sourceID}` }))
  if (claim.outcome !== "claimed") throw new Error(`claim of ${operationID} was ${claim.outcome}`)
  await store.markOperationSent(operationKey(operationID), { leaseToken: claim.lease.token })
  const finalized = await store.finalizeOperationAndArmWatch(operationKey(operationID), {
    leaseToken: claim.lease.token,
    sourceID,
    documentID: `doc-${sourceID}`,
    providerEtag: "etag-1",
    watchDueAt: NOW + 5_000
  })
  if (finalized.outcome !== "committed") throw new Error(`finalize of ${operationID} was ${finalized.outcome}`)
}

/** What a corrupt operation row is reported as. */
const corruptOperation = (db: Database, operationID: string, column: string) => ({
  _tag: "CorruptRow",
  table: `${db.tablePrefix}operation`,
  key: `did:caller:1/${operationID}`,
  column
})

/** Each way an operation row can be corrupt, on which databases: the column and the raw value written. */
const operationCorruptions: ReadonlyArray<{
  readonly column: string
  readonly value: string
  readonly on: ReadonlyArray<Database["name"]>
}> = [
  { column: "reissue_intent", value: "'{not json'", on: ["sqlite", "postgres"] },
  { column: "result_entity", value: "'not json either'", on: ["sqlite", "postgres"] },
  { column: "attempts", value: "'three'", on: ["sqlite"] },
  { column: "version", value: "'v2'", on: ["sqlite"] }
]

for (const { name, fresh } of databases) {
  describe(`a row that does not decode is quarantined, never fatal, on ${name}`, () => {
    for (const corruption of operationCorruptions) {
      it(`an operation whose ${corruption.column} does not decode: its calls fail with CorruptRow, the sweep and lists go on`, async () => {
        const db = await fresh()
        if (!corruption.on.includes(db.name)) return
        await withStore(db, async (store, raw) => {
          for (const id of ["op-a", "op-bad", "op-c"]) await claimDue(store, id)
          const table = `${db.tablePrefix}operation`
          await raw.run(`UPDATE ${table} SET ${corruption.column} = ${corruption.value} WHERE operation_id = 'op-bad'`)
          const before = await raw.rows(`SELECT * FROM ${table} ORDER BY operation_id`)
          const expected = corruptOperation(db, "op-bad", corruption.column)

          // Addressed, it fails with CorruptRow naming the method, on both APIs.
          expect(await rejectionOf(store.getOperation(operationKey("op-bad")))).toMatchObject({ ...expected, method: "getOperation" })
          expect(await effectFailureOf(store, (api) => api.getOperation(operationKey("op-bad"))))
            .toMatchObject({ ...expected, method: "getOperation" })
          // A replayed claim, on the lane (Promise) and on the Effect API.
          expect(await rejectionOf(store.claimOperation(claimInput({ operationID: "op-bad", sourceID: "src-op-bad", documentID: "doc-op-bad" }))))
            .toMatchObject({ ...expected, method: "claimOperation" })
          expect(await effectFailureOf(store, (api) =>
            api.claimOperation(claimInput({ operationID: "op-bad", sourceID: "src-op-bad", documentID: "doc-op-bad" }))))
            .toMatchObject({ ...expected, method: "claimOperation" })
          expect(await rejectionOf(store.markOperationSent(operationKey("op-bad"), { leaseToken: "not-the-lease" })))
            .toMatchObject({ ...expected, method: "markOperationSent" })

          // The sweep returns every healthy due row and reports the corrupt one, on both APIs.
          const due = await store.listDueOperations(NOW + 60_000)
          expect(due.operations.map((row) => row.operationID).sort()).toEqual(["op-a", "op-c"])
          expect(due.corrupt).toEqual([{ table, key: "did:caller:1/op-bad", column: corruption.column, detail: expect.any(String) }])
          const dueOnEffect = await store.runEffect(Effect.flatMap(ConnectorStore, (api) => api.listDueOperations(NOW + 60_000)))
          expect(dueOnEffect.operations.map((row) => row.operationID).sort()).toEqual(["op-a", "op-c"])
          expect(dueOnEffect.corrupt.map((report: CorruptRowReport) => report.key)).toEqual(["did:caller:1/op-bad"])

          // The lists return the healthy rows and report the corrupt one.
          const tracked = await store.listTrackedOperations({ visibleTo: "did:caller:1" })
          expect(tracked.operations.map((row) => row.operationID).sort()).toEqual(["op-a", "op-c"])
          expect(tracked.corrupt.map((report) => [report.key, report.column])).toEqual([["did:caller:1/op-bad", corruption.column]])
          const listed = await store.listOperations({})
          expect(listed.items.map((row) => row.operationID).sort()).toEqual(["op-a", "op-c"])
          expect(listed.corrupt.map((report) => report.key)).toEqual(["did:caller:1/op-bad"])
          const states = await store.getDocumentWriteStates(["doc-op-a", "doc-op-bad"])
          expect(states.get("doc-op-a")).toBeDefined()
          const status = await store.getStoreStatus()
          expect(status.operations.attempted).toBe(3)

          // Nothing was written by the refused calls.
          expect(await raw.rows(`SELECT * FROM ${table} ORDER BY operation_id`)).toEqual(before)

          // A healthy claim beside it works, and so does a healthy row's whole write-back.
          const next = await store.claimOperation(claimInput({ operationID: "op-new", sourceID: "src-op-new", documentID: "doc-op-new" }))
          expect(next.outcome).toBe("claimed")
          if (next.outcome !== "claimed") return
          expect((await store.markOperationSent(operationKey("op-new"), { leaseToken: next.lease.token })).outcome).toBe("sent")
          const finalized = await store.finalizeOperationAndArmWatch(operationKey("op-new"), {
            leaseToken: next.lease.token,
            sourceID: "src-op-new",
            documentID: "doc-op-new",
            providerEtag: "etag-1",
            watchDueAt: NOW + 5_000
          })
          expect(finalized.outcome).toBe("committed")
        })
      })
    }

    it("a page that left out a corrupt row still leads to the next: every healthy operation is listed across the pages", async () => {
      const db = await fresh()
      await withStore(db, async (store, raw) => {
        for (const id of ["op-a", "op-b", "op-bad", "op-d"]) await claimDue(store, id)
        await raw.run(`UPDATE ${db.tablePrefix}operation SET result_entity = 'oops' WHERE operation_id = 'op-bad'`)
        // Newest first, ties by key descending: op-d, op-bad, op-b, op-a; two a page.
        const tracked: Array<string> = []
        const trackedCorrupt: Array<string> = []
        let cursor: string | undefined
        for (let page = 0; page < 5; page++) {
          const read = await store.listTrackedOperations({ visibleTo: "did:caller:1", limit: 2, cursor })
          tracked.push(...read.operations.map((row) => row.operationID))
          trackedCorrupt.push(...read.corrupt.map((report) => report.key))
          if (read.nextCursor === null) break
          cursor = read.nextCursor
        }
        expect(tracked).toEqual(["op-d", "op-b", "op-a"])
        expect(trackedCorrupt).toEqual(["did:caller:1/op-bad"])
        const listed: Array<string> = []
        cursor = undefined
        for (let page = 0; page < 5; page++) {
          const read = await store.listOperations({ limit: 2, cursor })
          listed.push(...read.items.map((row) => row.operationID))
          if (read.nextCursor === null) break
          cursor = read.nextCursor
        }
        expect(listed).toEqual(["op-d", "op-b", "op-a"])
      })
    })

    it("a due page passes over a corrupt operation: its cursor moves past it, even when it is the whole page", async () => {
      const db = await fresh()
      await withStore(db, async (store, raw) => {
        const ids = ["op-a", "op-bad-1", "op-b", "op-bad-2", "op-bad-3", "op-c"]
        for (const id of ids) await claimDue(store, id)
        const table = `${db.tablePrefix}operation`
        // One next attempt for all, so the due order is the key order.
        await raw.run(`UPDATE ${table} SET next_attempt_at = ${NOW + 1_000}`)
        await raw.run(`UPDATE ${table} SET result_entity = 'oops' WHERE operation_id LIKE 'op-bad-%'`)
        const readers = { readWinner: () => "w-1" }
        for (const limit of [1, 2, 4]) {
          const listed: Array<string> = []
          const corrupt: Array<string> = []
          let cursor: string | undefined
          let pages = 0
          for (; pages < 20; pages++) {
            const page = await store.listDueWork({ now: NOW + 60_000, limit, readers, ...(cursor === undefined ? {} : { cursor }) })
            expect(page.operations.length + page.corrupt.length).toBeLessThanOrEqual(limit)
            listed.push(...page.operations.map((row) => row.operationID))
            corrupt.push(...page.corrupt.map((report) => `${report.key} ${report.column}`))
            if (page.cursor === null) break
            cursor = page.cursor
          }
          expect(listed, `limit ${limit}`).toEqual(["op-a", "op-b", "op-c"])
          expect(corrupt, `limit ${limit}`).toEqual(
            ["op-bad-1", "op-bad-2", "op-bad-3"].map((id) => `did:caller:1/${id} result_entity`)
          )
          expect(pages, `limit ${limit}`).toBe(Math.floor(ids.length / limit))
        }
      })
    })

    it("a due page passes over a corrupt watch (SQLite: text in an integer column) and its cursor moves past it", async () => {
      const db = await fresh()
      if (db.name !== "sqlite") return
      await withStore(db, async (store, raw) => {
        for (const source of ["src-a", "src-bad", "src-c"]) await committedWithWatch(store, source)
        const table = `${db.tablePrefix}projection_watch`
        await raw.run(`UPDATE ${table} SET repair_generation = 'two' WHERE source_id = 'src-bad'`)
        const listed: Array<string> = []
        const corrupt: Array<string> = []
        let cursor: string | undefined
        for (let pages = 0; pages < 10; pages++) {
          const page = await store.runEffect(Effect.flatMap(ConnectorStore, (api) =>
            api.listDueWork({ now: NOW + 60_000, limit: 1, ...(cursor === undefined ? {} : { cursor }) })))
          listed.push(...page.watches.map((row) => row.sourceID))
          corrupt.push(...page.corrupt.map((report) => report.key))
          if (page.cursor === null) break
          cursor = page.cursor
        }
        expect(listed).toEqual(["src-a", "src-c"])
        expect(corrupt).toEqual(["did:owner:1/gcal/Event/acct-1/src-bad"])
      })
    })

    it("a corrupt watch (SQLite: text in an integer column) fails its calls, and the sweep reports it and goes on", async () => {
      const db = await fresh()
      if (db.name !== "sqlite") return
      await withStore(db, async (store, raw) => {
        const identity = (sourceID: string) =>
          ({ ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1", sourceID })
        for (const source of ["src-a", "src-bad", "src-c"]) await committedWithWatch(store, source)
        const table = `${db.tablePrefix}projection_watch`
        await raw.run(`UPDATE ${table} SET repair_generation = 'two' WHERE source_id = 'src-bad'`)
        const before = await raw.rows(`SELECT * FROM ${table} ORDER BY source_id`)
        const expected = {
          _tag: "CorruptRow",
          table,
          key: "did:owner:1/gcal/Event/acct-1/src-bad",
          column: "repair_generation"
        }
        expect(await rejectionOf(store.getWatch(identity("src-bad")))).toMatchObject({ ...expected, method: "getWatch" })
        expect(await rejectionOf(store.armWatch(identity("src-bad"), "manual", { dueAt: NOW })))
          .toMatchObject({ ...expected, method: "armWatch" })
        expect(await effectFailureOf(store, (api) => api.armWatch(identity("src-bad"), "manual", { dueAt: NOW })))
          .toMatchObject({ ...expected, method: "armWatch" })
        const due = await store.listDueOperations(NOW + 60_000)
        expect(due.watches.map((row) => row.sourceID).sort()).toEqual(["src-a", "src-c"])
        expect(due.corrupt.map((report) => [report.key, report.column])).toEqual([[expected.key, "repair_generation"]])
        const byDocument = await store.listWatches({})
        expect(byDocument.items.map((row) => row.sourceID)).toEqual(["src-a", "src-c"])
        expect(byDocument.corrupt.map((report) => report.key)).toEqual([expected.key])
        expect(await raw.rows(`SELECT * FROM ${table} ORDER BY source_id`)).toEqual(before)
        expect(await store.armWatch(identity("src-a"), "manual", { dueAt: NOW })).toBeTypeOf("string")
        await committedWithWatch(store, "src-new")
        expect(await store.getWatch(identity("src-new"))).toMatchObject({ sourceID: "src-new" })
      })
    })

    it("a sync state whose checkpoint or recovery is not JSON fails its calls with CorruptRow; the lists go on", async () => {
      const db = await fresh()
      await withStore(db, async (store, raw) => {
        const state = { status: "idle", lastSyncedAt: "2024-01-01T00:00:00Z", entityCount: 1, checkpoint: { page: 1 } } as const
        for (const owner of ["did:owner:a", "did:owner:bad", "did:owner:c"]) await store.setSyncState("gcal", owner, state as never)
        const table = `${db.tablePrefix}sync_state`
        for (const column of ["checkpoint", "recovery"]) {
          await raw.run(`UPDATE ${table} SET ${column} = '{"page":' WHERE owner_did = 'did:owner:bad'`)
          const before = await raw.rows(`SELECT * FROM ${table} ORDER BY owner_did`)
          const expected = { _tag: "CorruptRow", table, key: "gcal/did:owner:bad", column }
          expect(await rejectionOf(store.getSyncState("gcal", "did:owner:bad"))).toMatchObject({ ...expected, method: "getSyncState" })
          // The Effect API declares it: catchTag("CorruptRow") type-checks and catches.
          const caught = await store.runEffect(Effect.flatMap(ConnectorStore, (api) =>
            api.getSyncState("gcal", "did:owner:bad").pipe(
              Effect.as("decoded"),
              Effect.catchTag("CorruptRow", (error) => Effect.succeed(`corrupt ${error.column}`))
            )))
          expect(caught).toBe(`corrupt ${column}`)
          expect(await rejectionOf(store.updateSyncProgress("gcal", "did:owner:bad", () => ({ entityCount: 2 }) as never)))
            .toMatchObject({ ...expected, method: "updateSyncProgress" })
          expect(await rejectionOf(store.setSyncState("gcal", "did:owner:bad", state as never)))
            .toMatchObject({ ...expected, method: "setSyncState" })
          expect(await raw.rows(`SELECT * FROM ${table} ORDER BY owner_did`)).toEqual(before)
          const skipped = () => store.runEffect(Metric.value(Metric.tagged(StoreMetrics.corruptRowsSkipped, "table", table)))
          const skippedBefore = (await skipped()).count
          const entries = await store.listSyncStatesForConnector("gcal")
          expect(entries.map((entry) => entry.ownerDID)).toEqual(["did:owner:a", "did:owner:c"])
          expect((await skipped()).count).toBe(skippedBefore + 1)
          const page = await store.listSyncStates({})
          expect(page.items.map((entry) => entry.ownerDID)).toEqual(["did:owner:a", "did:owner:c"])
          expect(page.corrupt.map((report) => [report.key, report.column])).toEqual([["gcal/did:owner:bad", column]])
          expect((await store.getSyncState("gcal", "did:owner:a"))?.checkpoint).toEqual({ page: 1 })
          await raw.run(`UPDATE ${table} SET ${column} = NULL WHERE owner_did = 'did:owner:bad'`)
        }
      })
    })

    it("a pending authorization whose scopes are not JSON fails its consume with CorruptRow and stays stored", async () => {
      const db = await fresh()
      await withStore(db, async (store, raw) => {
        const record = (state: string) => ({
          state,
          codeVerifier: "v".repeat(43),
          provider: "google",
          ownerDID: "did:owner:1",
          createdAt: NOW,
          redirectURL: "https://example.com/back",
          scopes: ["calendar"],
          expiresAt: NOW + 600_000
        })
        await store.createPendingAuth(record("state-bad") as never)
        await store.createPendingAuth(record("state-ok") as never)
        const table = `${db.tablePrefix}pending_auth`
        await raw.run(`UPDATE ${table} SET scopes = '[calendar' WHERE state = 'state-bad'`)
        const error = await rejectionOf(store.consumePendingAuth("state-bad"))
        expect(error).toMatchObject({ _tag: "CorruptRow", table, key: "state-bad", column: "scopes", method: "consumePendingAuth" })
        expect(String((error as Error).message)).not.toContain("v".repeat(43))
        expect(await raw.rows(`SELECT state FROM ${table} ORDER BY state`)).toEqual([{ state: "state-bad" }, { state: "state-ok" }])
        expect(await store.consumePendingAuth("state-ok")).toMatchObject({ state: "state-ok", scopes: ["calendar"] })
      })
    })

    it("a sweep candidate whose document has an operation that cannot be decoded is refused, not judged without it", async () => {
      const db = await fresh()
      await withStore(db, async (store, raw) => {
        for (const source of ["kept", "gone"]) await committedWithWatch(store, source)
        const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
        const run = await store.startRelistRun(scope)
        const receipts = [{ sourceID: "kept", digest: "d1" }]
        expect(await store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts, complete: true })).toBe("completed")
        const options = { limit: 10, maxDeletionFraction: 1 }
        expect((await store.listSweepCandidates(run.runID, options)).map((row) => [row.sourceID, row.kind])).toEqual([["gone", "deleted"]])
        const table = `${db.tablePrefix}operation`
        await raw.run(`UPDATE ${table} SET result_entity = '{gone' WHERE document_id = 'doc-gone'`)
        expect(await rejectionOf(store.listSweepCandidates(run.runID, options))).toMatchObject({
          _tag: "CorruptRow",
          table,
          key: "did:caller:1/op-gone",
          column: "result_entity",
          method: "listSweepCandidates"
        })
        // A plain read of the document's write state leaves the row out instead.
        expect((await store.getDocumentWriteStates(["doc-gone"])).has("doc-gone")).toBe(true)
      })
    })

    it("a relist run with text in a count column (SQLite) fails its reads with CorruptRow; the run list reports it", async () => {
      const db = await fresh()
      if (db.name !== "sqlite") return
      await withStore(db, async (store, raw) => {
        const scope = (accountKey: string) => ({ ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey })
        const bad = await store.startRelistRun(scope("acct-bad"))
        await store.startRelistRun(scope("acct-ok"))
        const table = `${db.tablePrefix}relist_run`
        await raw.run(`UPDATE ${table} SET pages_committed = 'many' WHERE run_id = '${bad.runID}'`)
        const expected = { _tag: "CorruptRow", table, key: bad.runID, column: "pages_committed" }
        expect(await rejectionOf(store.getRelistRun(bad.runID))).toMatchObject({ ...expected, method: "getRelistRun" })
        expect(await rejectionOf(store.startRelistRun(scope("acct-bad")))).toMatchObject({ ...expected, method: "startRelistRun" })
        // The Effect API declares it on the relist calls too: catchTag("CorruptRow") type-checks and catches.
        const caught = await store.runEffect(Effect.flatMap(ConnectorStore, (api) =>
          api.getSweepCheckpoint(scope("acct-bad")).pipe(
            Effect.as("decoded"),
            Effect.catchTag("CorruptRow", (error) => Effect.succeed(`corrupt ${error.column}`))
          )))
        expect(caught).toBe("corrupt pages_committed")
        const runs = await store.listRelistRuns({})
        expect(runs.items.map((run) => run.accountKey)).toEqual(["acct-ok"])
        expect(runs.corrupt.map((report) => report.key)).toEqual([bad.runID])
      })
    })
  })
}
