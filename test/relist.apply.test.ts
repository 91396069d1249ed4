import {
  ConnectorStore,
  type ProjectionWatch,
  type PromiseConnectorStore,
  type RelistScope,
  type SweepCandidate,
  type SweepCandidateRef
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore, type SqlTransaction } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { afterEach } from "vitest"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, onFreshStore, seedWatches, snapshot } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"
import { Winners } from "./support/contract/winners.js"

/**
 * `applySweepCandidate`: the applier's work runs inside the store's
 * transaction, after the candidate was re-derived under its locks, and
 * commits with the mark or not at all. On the SQL adapters the work is a
 * real write to an app table in the same database.
 */
const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }

const tracked = (sourceID: string): ProjectionWatch =>
  watchRow({
    ...scope,
    sourceID,
    documentID: `doc-${sourceID}`,
    verifiedStateDigest: "v1",
    observedWinnerDigest: "v1",
    verificationStatus: "verified",
    nextAttemptAt: null,
    updatedAt: NOW - 1_000
  })

const all = { limit: 100, maxDeletionFraction: 1 } as const

/** Seeds s1..s3, completes a run that saw s3 only: s1 and s2 are deletion candidates. */
const completeRun = Effect.gen(function*() {
  yield* seedWatches(tracked("s1"), tracked("s2"), tracked("s3"))
  yield* at(NOW + 10)
  const store = yield* ConnectorStore
  const run = yield* store.startRelistRun(scope)
  expect(yield* store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [{ sourceID: "s3", digest: "v1" }], complete: true }))
    .toBe("completed")
  expect((yield* store.listSweepCandidates(run.runID, all)).map((c) => c.sourceID)).toEqual(["s1", "s2"])
  return run.runID
})

const statusOf = (sourceID: string) =>
  Effect.flatMap(ConnectorStore, (store) =>
    Effect.map(store.getSweepCandidate({ ...scope, sourceID }), (row) => Option.getOrThrow(row).status))

let tables = 0

/**
 * The app's documents, in the store's own database on the SQL adapters (a
 * table with one row per document), in a map on the memory adapter, which
 * has no app tables: `remove` is what an applier does.
 */
const appDocuments = (sqlAdapter: boolean) =>
  Effect.gen(function*() {
    const ids = ["doc-s1", "doc-s2", "doc-s3"]
    if (!sqlAdapter) {
      const docs = new Set(ids)
      return {
        remove: (documentID: string) => Effect.sync(() => void docs.delete(documentID)),
        present: Effect.sync(() => Array.from(docs).sort())
      }
    }
    const sql = Option.getOrThrow(yield* Effect.serviceOption(SqlClient))
    const table = `app_document_${process.pid}_${++tables}`
    yield* sql.unsafe(`CREATE TABLE ${table} (id TEXT PRIMARY KEY)`)
    for (const id of ids) yield* sql.unsafe(`INSERT INTO ${table} (id) VALUES ('${id}')`)
    return {
      remove: (documentID: string) => Effect.asVoid(sql`DELETE FROM ${sql(table)} WHERE id = ${documentID}`),
      present: Effect.map(sql<{ id: string }>`SELECT id FROM ${sql(table)} ORDER BY id`, (rows) => rows.map((r) => r.id))
    }
  }).pipe(Effect.orDie)

for (const adapter of adapters) {
  const sqlAdapter = adapter.name !== "memory"
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, new Winners({ "doc-s1": "v1" }).single(), Effect.zipRight(at(NOW), body))
  /** A complete run whose candidate s1 is decided `delete_local`, and the app's documents beside it. */
  const decidedS1 = Effect.gen(function*() {
    const runID = yield* completeRun
    const docs = yield* appDocuments(sqlAdapter)
    const store = yield* ConnectorStore
    const ref = { runID, sourceID: "s1" }
    expect(yield* store.recordSweepOutcome(ref, "delete_local")).toBe("recorded")
    return { docs, ref, runID, store }
  })

  describe(`applying a sweep candidate inside the store's transaction, on ${adapter.name}`, () => {
    it.effect("a decided deletion is applied and marked in one transaction, the applier handed the candidate", () =>
      onStore(Effect.gen(function*() {
        const { docs, ref, store } = yield* decidedS1
        const seen: Array<SweepCandidate> = []
        expect(yield* store.applySweepCandidate(ref, (candidate) => {
          seen.push(candidate)
          return docs.remove(candidate.documentID)
        })).toBe("applied")
        expect(seen.map((c) => [c.sourceID, c.documentID, c.kind, c.status])).toEqual([["s1", "doc-s1", "deleted", "decided"]])
        expect(yield* statusOf("s1")).toBe("applied")
        expect(yield* docs.present).toEqual(["doc-s2", "doc-s3"])
        // Applied already: the applier is not run again.
        expect(yield* store.applySweepCandidate(ref, () => Effect.sync(() => seen.push(seen[0]!)))).toBe("applied")
        expect(seen.length).toBe(1)
      })))

    it.effect("an applier that fails rolls back its own writes and marks nothing; the failure is then counted", () =>
      onStore(Effect.gen(function*() {
        const { docs, ref, runID, store } = yield* decidedS1
        const cause = new Error("provider still has it")
        const failed = yield* Effect.flip(store.applySweepCandidate(ref, (candidate) =>
          Effect.zipRight(docs.remove(candidate.documentID), Effect.fail(cause))))
        expect(failed).toMatchObject({
          _tag: "SweepApplyFailed",
          method: "applySweepCandidate",
          runID,
          sourceID: "s1",
          documentID: "doc-s1",
          cause
        })
        expect(yield* statusOf("s1")).toBe("decided")
        expect(yield* docs.present).toEqual(sqlAdapter ? ["doc-s1", "doc-s2", "doc-s3"] : ["doc-s2", "doc-s3"])
        expect(yield* store.recordSweepApplyFailure(ref, { kind: "confirm", message: "provider still has it" })).toBe("retry")
        expect(yield* store.applySweepCandidate(ref, (candidate) => docs.remove(candidate.documentID))).toBe("applied")
      })))

    it.effect("a candidate withdrawn since it was decided never runs the applier", () =>
      onStore(Effect.gen(function*() {
        const { docs, ref, store } = yield* decidedS1
        // The watch is written after the decision (a person re-arms it): the deletion's reason is gone.
        expect(yield* store.armWatch({ ...scope, sourceID: "s1" }, "manual", { dueAt: NOW + 10 })).toBe("opened")
        let ran = 0
        expect(yield* Effect.flip(store.applySweepCandidate(ref, () => Effect.sync(() => ran++)))).toMatchObject({
          _tag: "SweepCandidateWithdrawn",
          method: "applySweepCandidate",
          sourceID: "s1",
          reason: "watch-changed"
        })
        expect(ran).toBe(0)
        expect(yield* statusOf("s1")).toBe("decided")
        expect(yield* docs.present).toEqual(["doc-s1", "doc-s2", "doc-s3"])
      })))

    it.effect("only a decided candidate runs the applier: open, kept, given-up and stale-run ones answer without it", () =>
      onStore(Effect.gen(function*() {
        const runID = yield* completeRun
        const store = yield* ConnectorStore
        let ran = 0
        const apply = () => Effect.sync(() => ran++)
        const s1: SweepCandidateRef = { runID, sourceID: "s1" }
        const s2: SweepCandidateRef = { runID, sourceID: "s2" }
        expect(yield* store.applySweepCandidate(s1, apply)).toBe("undecided")
        expect(yield* store.recordSweepOutcome(s1, "keep")).toBe("recorded")
        expect(yield* store.applySweepCandidate(s1, apply)).toBe("kept")
        expect(yield* store.recordSweepOutcome(s2, "delete_local")).toBe("recorded")
        for (let i = 0; i < 5; i++) yield* store.recordSweepApplyFailure(s2, { kind: "network", message: "down" })
        expect(yield* store.applySweepCandidate(s2, apply)).toBe("given-up")
        expect(yield* Effect.flip(store.applySweepCandidate({ runID, sourceID: "s3" }, apply)))
          .toMatchObject({ _tag: "SweepCandidateNotFound", method: "applySweepCandidate", sourceID: "s3" })
        yield* at(NOW + 20)
        yield* store.startRelistRun(scope)
        expect(yield* store.applySweepCandidate(s1, apply)).toBe("stale-run")
        expect(ran).toBe(0)
      })))

    it.effect("an applier that is not a function is refused, naming it, and nothing changes", () =>
      onStore(Effect.gen(function*() {
        const { ref, runID, store } = yield* decidedS1
        const before = yield* snapshot
        for (const apply of [undefined, null, "delete", {}]) {
          expect(yield* Effect.flip(store.applySweepCandidate(ref, apply as never)))
            .toMatchObject({ _tag: "InvalidInput", method: "applySweepCandidate", field: "apply" })
        }
        expect(yield* Effect.flip(store.applySweepCandidate({ runID, sourceID: "" }, () => Effect.void)))
          .toMatchObject({ _tag: "InvalidInput", field: "ref.sourceID" })
        expect(yield* snapshot).toEqual(before)
      })))
  })

  describe(`applying a sweep candidate through the Promise methods, on ${adapter.name}`, () => {
    const closers: Array<() => Promise<void>> = []
    afterEach(async () => {
      for (const close of closers.splice(0)) await close()
    })

    /** A Promise store, whose `applySweepCandidate` hands the callback the adapter's transaction handle, as winner readers get it. */
    const open = async () => {
      let now = NOW
      const store = (sqlAdapter
        ? await openConnectorStore({ ...(await adapter.connection()), now: () => now })
        : openMemoryConnectorStore({ now: () => now })) as PromiseConnectorStore<unknown>
      closers.push(() => store.close())
      const sql = sqlAdapter ? await store.runEffect(Effect.map(Effect.serviceOption(SqlClient), Option.getOrThrow)) : undefined
      const relist = store
      await store.runEffect(seedWatches(tracked("s1"), tracked("s2")) as never)
      const table = `app_document_${process.pid}_${++tables}`
      if (sql !== undefined) {
        await store.runEffect(Effect.orDie(sql.unsafe(`CREATE TABLE ${table} (id TEXT PRIMARY KEY)`)))
        await store.runEffect(Effect.orDie(sql.unsafe(`INSERT INTO ${table} (id) VALUES ('doc-s1'), ('doc-s2')`)))
      }
      now += 10
      const run = await relist.startRelistRun(scope)
      expect(await relist.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [], complete: true })).toBe("completed")
      const present = async () =>
        sql === undefined ? [] : (await store.runEffect(Effect.orDie(sql.unsafe<{ id: string }>(`SELECT id FROM ${table} ORDER BY id`))))
          .map((r) => r.id)
      const placeholder = adapter.name === "postgres" ? "$1" : "?"
      const remove = (tx: unknown, documentID: string) => {
        if (sql === undefined) return Promise.resolve()
        // On SQL the handle runs its queries inside the store's own transaction.
        expect(tx).toMatchObject({ dialect: adapter.name === "postgres" ? "pg" : "sqlite" })
        return (tx as SqlTransaction).query(`DELETE FROM ${table} WHERE id = ${placeholder}`, [documentID]).then(() => {})
      }
      return { relist, runID: run.runID, present, remove }
    }

    it("the callback runs in the transaction with its handle; a throw or a rejection rolls it back as SweepApplyFailed", async () => {
      const { relist, runID, present, remove } = await open()
      const s1 = { runID, sourceID: "s1" }
      const s2 = { runID, sourceID: "s2" }
      expect(await relist.recordSweepOutcome(s1, "delete_local")).toBe("recorded")
      expect(await relist.recordSweepOutcome(s2, "delete_local")).toBe("recorded")
      const rejected = await relist.applySweepCandidate(s1, async (candidate, tx) => {
        await remove(tx, candidate.documentID)
        throw new Error("confirm failed")
      }).catch((e: unknown) => e)
      expect(rejected).toMatchObject({ _tag: "SweepApplyFailed", sourceID: "s1", cause: new Error("confirm failed") })
      const thrown = await relist.applySweepCandidate(s1, () => {
        throw new Error("sync")
      }).catch((e: unknown) => e)
      expect(thrown).toMatchObject({ _tag: "SweepApplyFailed", sourceID: "s1", cause: new Error("sync") })
      expect(await relist.getSweepCandidate({ ...scope, sourceID: "s1" })).toMatchObject({ status: "decided" })
      expect(await present()).toEqual(sqlAdapter ? ["doc-s1", "doc-s2"] : [])
      expect(await relist.applySweepCandidate(s1, (candidate, tx) => remove(tx, candidate.documentID))).toBe("applied")
      expect(await relist.applySweepCandidate(s2, (candidate, tx) => remove(tx, candidate.documentID))).toBe("applied")
      expect(await present()).toEqual([])
      await expect(relist.applySweepCandidate(s1, "nope" as never)).rejects.toMatchObject({ _tag: "InvalidInput", field: "apply" })
    })
  })
}
