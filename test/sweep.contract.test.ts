import {
  clockFrom,
  type ConnectorOperation,
  ConnectorStore,
  type ProjectionWatch,
  type WinnerReaders
} from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { keyLabel, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import {
  at,
  failsChangingNothing,
  onFreshStore,
  seedOperations,
  seedWatches,
  storedOperation
} from "./support/contract/store.js"
import { expectedCollection } from "./support/contract/keepRule.js"
import { retentionCase } from "./support/contract/retentionCase.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"
import { propertyRuns } from "./support/runs.js"

const adapters = await adaptersUnderTest()

/** A watch of its own identity and document, named by its source id. */
const watch = (name: string, patch: Partial<ProjectionWatch>): ProjectionWatch =>
  watchRow({ sourceID: name, documentID: `doc-${name}`, ...patch })

const names = (rows: ReadonlyArray<ProjectionWatch>) => rows.map((row) => row.sourceID).sort()
const keys = (rows: ReadonlyArray<ConnectorOperation>) => rows.map(keyLabel).sort()

for (const adapter of adapters) {
  const onStore = <A, E>(readers: WinnerReaders, body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, readers, Effect.zipRight(at(NOW), body))

  describe(`due sweep on ${adapter.name}`, () => {
    it.effect("lists attempted operations with no next attempt or one at or before now, and nothing else", () =>
      onStore(new Winners().single(), Effect.gen(function*() {
        const op = (operationID: string, patch: Partial<ConnectorOperation>) => operationRow({ operationID, ...patch })
        const due = [
          op("unscheduled", { state: "attempted", nextAttemptAt: null }),
          op("due-now", { state: "attempted", nextAttemptAt: NOW }),
          op("overdue", { state: "attempted", nextAttemptAt: NOW - 1, deferReason: "offline" })
        ]
        const notDue = [
          op("backed-off", { state: "attempted", nextAttemptAt: NOW + 1 }),
          op("committed", { state: "committed", nextAttemptAt: null }),
          op("dead", { state: "dead", nextAttemptAt: NOW - 1 }),
          op("reconcile", { state: "reconcile_only", nextAttemptAt: null })
        ]
        yield* seedOperations(...due, ...notDue)
        const store = yield* ConnectorStore
        const found = yield* store.listDueOperations(NOW)
        expect(keys(found.operations)).toEqual(keys(due))
        expect([...found.operations].sort((a, b) => keyLabel(a).localeCompare(keyLabel(b))))
          .toEqual([...due].sort((a, b) => keyLabel(a).localeCompare(keyLabel(b))))
        expect(found.watches).toEqual([])
      })))

    it.effect("the schedule branch lists unsettled watches due at or before now", () => {
      // Every winner equals its watch's verified watermark, so the audit branch adds nothing.
      const winners = new Winners()
      return onStore(winners.single(), Effect.gen(function*() {
        const due = [
          watch("pending-overdue", { nextAttemptAt: NOW - 1 }),
          watch("pending-due-now", { nextAttemptAt: NOW }),
          watch("failed-scheduled", { verificationStatus: "repair_failed", nextAttemptAt: NOW - 5 })
        ]
        const notDue = [
          watch("pending-later", { nextAttemptAt: NOW + 1 }),
          watch("pending-unscheduled", { nextAttemptAt: null }),
          watch("verified-scheduled", { verificationStatus: "verified", nextAttemptAt: NOW - 5 })
        ]
        for (const row of [...due, ...notDue]) winners.set(row.documentID, row.verifiedStateDigest)
        yield* seedWatches(...due, ...notDue)
        const store = yield* ConnectorStore
        const found = yield* store.listDueOperations(NOW)
        expect(names(found.watches)).toEqual(names(due))
        expect(found.watches.find((row) => row.sourceID === "pending-due-now")).toEqual(due[1])
      }))
    })

    it.effect("the audit branch lists settled watches whose current winner is news to both watermarks", () => {
      const winners = new Winners()
      return onStore(winners.single(), Effect.gen(function*() {
        const settled = { nextAttemptAt: null, verifiedStateDigest: "v", observedWinnerDigest: "o" } as const
        const cases: ReadonlyArray<readonly [ProjectionWatch, string, boolean]> = [
          [watch("verified-moved", { ...settled, verificationStatus: "verified" }), "w", true],
          [watch("verified-at-verified", { ...settled, verificationStatus: "verified" }), "v", false],
          [watch("verified-at-observed", { ...settled, verificationStatus: "verified" }), "o", false],
          [watch("failed-moved", { ...settled, verificationStatus: "repair_failed", verifiedStateDigest: null }), "w", true],
          [watch("failed-unmoved", { ...settled, verificationStatus: "repair_failed", verifiedStateDigest: null }), "o", false],
          [watch("pending-moved", { ...settled, verificationStatus: "pending_verification" }), "w", false],
          [watch("pending-moved-later", { ...settled, nextAttemptAt: NOW + 10 }), "w", false]
        ]
        for (const [row, winner] of cases) winners.set(row.documentID, winner)
        yield* seedWatches(...cases.map(([row]) => row))
        const store = yield* ConnectorStore
        const found = yield* store.listDueOperations(NOW)
        expect(names(found.watches)).toEqual(names(cases.filter(([, , due]) => due).map(([row]) => row)))
      }))
    })

    it.effect("a watch due by schedule and diverged appears once", () =>
      onStore(new Winners({ "doc-both": "w-moved" }).single(), Effect.gen(function*() {
        const both = watch("both", { verificationStatus: "repair_failed", nextAttemptAt: NOW - 1 })
        yield* seedWatches(both)
        const store = yield* ConnectorStore
        expect((yield* store.listDueOperations(NOW)).watches).toEqual([both])
      })))

    it.effect("documents whose single winner read fails or finds none are skipped, never failing the sweep", () => {
      const winners = new Winners({ "doc-readable": "w", "doc-none": null, "doc-scheduled": "w" }).breakRead("doc-broken")
        .breakRead("doc-scheduled")
      return onStore(winners.single(), Effect.gen(function*() {
        const settled = { verificationStatus: "verified", nextAttemptAt: null } as const
        yield* seedWatches(
          watch("readable", settled),
          watch("broken", settled),
          watch("none", settled),
          // The schedule branch needs no winner: a broken reader does not hide it.
          watch("scheduled", { nextAttemptAt: NOW - 1 })
        )
        const store = yield* ConnectorStore
        expect(names((yield* store.listDueOperations(NOW)).watches)).toEqual(["readable", "scheduled"])
        expect(winners.singleReads).toContain("doc-broken")
      }))
    })

    for (const failWhole of [false, true]) {
      const label = failWhole ? "a batch read that fails skips its documents" : "a batch read that leaves a document out skips it"
      it.effect(`${label}, never failing the sweep`, () => {
        const winners = new Winners({ "doc-readable": "w", "doc-broken": "w" }).breakRead("doc-broken")
        return onStore(winners.batch({ failWhole }), Effect.gen(function*() {
          const settled = { verificationStatus: "verified", nextAttemptAt: null } as const
          yield* seedWatches(watch("readable", settled), watch("broken", settled), watch("scheduled", { nextAttemptAt: NOW }))
          const store = yield* ConnectorStore
          const found = names((yield* store.listDueOperations(NOW)).watches)
          expect(found).toEqual(failWhole ? ["scheduled"] : ["readable", "scheduled"])
          expect(winners.batchReads.flat().sort()).toEqual(["doc-broken", "doc-readable"])
        }))
      })
    }

    it.effect("readers passed to the call are used instead of the configured ones", () => {
      const configured = new Winners({ "doc-a": "v", "doc-b": "w-call" })
      const perCall = new Winners({ "doc-a": "w-call", "doc-b": "w-call" })
      return onStore(configured.single(), Effect.gen(function*() {
        const settled = { verificationStatus: "verified", nextAttemptAt: null, verifiedStateDigest: "v" } as const
        // a: diverged only for the per-call reader; b: diverged for both.
        yield* seedWatches(watch("a", settled), watch("b", { ...settled, observedWinnerDigest: "o" }))
        const store = yield* ConnectorStore
        expect(names((yield* store.listDueOperations(NOW, perCall.batch())).watches)).toEqual(["a", "b"])
        expect(configured.singleReads).toEqual([])
        expect(names((yield* store.listDueOperations(NOW, {})).watches)).toEqual(["b"])
        expect(names((yield* store.listDueOperations(NOW)).watches)).toEqual(["b"])
        expect(names((yield* store.listDueOperations(NOW, perCall.single())).watches)).toEqual(["a", "b"])
      }))
    })

    it.effect("a sweep with no reader anywhere fails with WinnerReaderMissing; a per-call reader suffices", () =>
      onStore({}, Effect.gen(function*() {
        yield* seedWatches(watch("a", { verificationStatus: "verified", nextAttemptAt: null }))
        const store = yield* ConnectorStore
        expect(yield* failsChangingNothing(store.listDueOperations(NOW)))
          .toMatchObject({ _tag: "WinnerReaderMissing", method: "listDueOperations" })
        const found = yield* store.listDueOperations(NOW, new Winners({ "doc-a": "w" }).single())
        expect(names(found.watches)).toEqual(["a"])
      })))

    it.effect("the audit reads every settled watch's winner, in batches, across more than one chunk", () => {
      const winners = new Winners()
      return onStore(winners.batch(), Effect.gen(function*() {
        const rows = Array.from({ length: 600 }, (_, i) =>
          watch(`s${i}`, { verificationStatus: i % 2 === 0 ? "verified" : "repair_failed", nextAttemptAt: null }))
        rows.forEach((row, i) => winners.set(row.documentID, i % 3 === 0 ? "w-moved" : row.observedWinnerDigest))
        yield* seedWatches(...rows)
        const store = yield* ConnectorStore
        const found = yield* store.listDueOperations(NOW)
        expect(names(found.watches)).toEqual(names(rows.filter((_, i) => i % 3 === 0)))
        expect(winners.batchReads.length).toBeGreaterThan(1)
        expect(winners.batchReads.flat().sort()).toEqual(rows.map((row) => row.documentID).sort())
      }))
    }, 60_000)
  })

  describe(`the audit's pages on ${adapter.name}`, () => {
    it.effect("one call audits at most a page of 1,000 settled watches; a full pass of 1,500 takes two calls and finds every diverged one; the third starts over", () => {
      const winners = new Winners()
      return onStore(winners.batch(), Effect.gen(function*() {
        const rows = Array.from({ length: 1_500 }, (_, i) =>
          watch(`p${i}`, { verificationStatus: i % 2 === 0 ? "verified" : "repair_failed", nextAttemptAt: null }))
        rows.forEach((row, i) => winners.set(row.documentID, i % 3 === 0 ? "w-moved" : row.observedWinnerDigest))
        yield* seedWatches(...rows)
        const store = yield* ConnectorStore
        const diverged = names(rows.filter((_, i) => i % 3 === 0))
        const audited = () => {
          const read = winners.batchReads.flat()
          winners.batchReads.length = 0
          return read
        }
        const first = yield* store.listDueOperations(NOW)
        const firstRead = audited()
        expect(firstRead.length).toBe(1_000)
        const second = yield* store.listDueOperations(NOW)
        const secondRead = audited()
        expect(secondRead.length).toBe(500)
        expect([...firstRead, ...secondRead].sort()).toEqual(rows.map((row) => row.documentID).sort())
        expect([...names(first.watches), ...names(second.watches)].sort()).toEqual([...diverged].sort())
        const third = yield* store.listDueOperations(NOW)
        expect(audited().sort()).toEqual([...firstRead].sort())
        expect(names(third.watches)).toEqual(names(first.watches))
      }))
    }, 180_000)
  })

  describe(`retention on ${adapter.name}`, () => {
    const collect = (before: number, limit: number) =>
      Effect.flatMap(ConnectorStore, (store) => store.collectFinishedOperations({ before, limit }))
    /** The keys, among `rows`, still stored. */
    const surviving = (rows: ReadonlyArray<ConnectorOperation>) =>
      Effect.map(
        Effect.forEach(rows, (row) => Effect.map(storedOperation(row), (stored) => stored === undefined ? [] : [keyLabel(row)])),
        (found) => found.flat().sort()
      )
    /** An operation on `documentID` created at `createdAt`, by default old and committed. */
    const op = (operationID: string, createdAt: number, patch: Partial<ConnectorOperation> = {}) =>
      operationRow({ operationID, createdAt, updatedAt: NOW - 1_000 + createdAt, ...patch })

    const badParams: ReadonlyArray<readonly [string, unknown, string]> = [
      ["before is NaN", { before: Number.NaN, limit: 10 }, "params.before"],
      ["before is Infinity", { before: Number.POSITIVE_INFINITY, limit: 10 }, "params.before"],
      ["before is -Infinity", { before: Number.NEGATIVE_INFINITY, limit: 10 }, "params.before"],
      ["before is a string", { before: String(NOW), limit: 10 }, "params.before"],
      ["limit is 0", { before: NOW, limit: 0 }, "params.limit"],
      ["limit is -1", { before: NOW, limit: -1 }, "params.limit"],
      ["limit is 1.5", { before: NOW, limit: 1.5 }, "params.limit"],
      ["limit is NaN", { before: NOW, limit: Number.NaN }, "params.limit"],
      ["limit is Infinity", { before: NOW, limit: Number.POSITIVE_INFINITY }, "params.limit"],
      ["limit is missing", { before: NOW }, "params.limit"],
      ["params are missing", undefined, "params"]
    ]
    it.effect("bad before or limit is rejected with InvalidInput before anything is deleted", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [op("orphan-1", 1, { documentID: null }), op("orphan-2", 2, { documentID: null, state: "dead" })]
        yield* seedOperations(...rows)
        const store = yield* ConnectorStore
        for (const [label, params, field] of badParams) {
          const error = yield* failsChangingNothing(
            store.collectFinishedOperations(params as { before: number; limit: number })
          )
          expect(error, label).toMatchObject({ _tag: "InvalidInput", method: "collectFinishedOperations", field })
        }
        // The same rows go with valid parameters: the refusals were not for lack of work.
        expect(yield* collect(NOW, 10)).toBe(2)
      })))

    it.effect("of one caller's and owner's commits on a document only the newest survives", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [op("a", 1), op("b", 2), op("c", 3)]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(2)
        expect(yield* surviving(rows)).toEqual(["did:caller:1/c"])
      })))

    it.effect("the newest commit of each owner survives even when its caller has a newer one", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [op("owner-1", 1, { ownerDID: "did:owner:1" }), op("owner-2", 2, { ownerDID: "did:owner:2" })]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(0)
        expect(yield* surviving(rows)).toEqual(keys(rows))
      })))

    it.effect("the newest commit of each caller survives even when its owner has a newer one", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [op("x", 1, { callerDID: "did:caller:1" }), op("x", 2, { callerDID: "did:caller:2" })]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(0)
        expect(yield* surviving(rows)).toEqual(keys(rows))
      })))

    it.effect("the newest commit and the newest finished row both survive; what they supersede goes", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [
          op("committed-old", 1),
          op("dead-old", 2, { state: "dead" }),
          op("committed-newest", 3),
          op("dead-newest", 4, { state: "dead" })
        ]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(2)
        expect(yield* surviving(rows)).toEqual(["did:caller:1/committed-newest", "did:caller:1/dead-newest"])
      })))

    it.effect("rows still in flight neither go nor supersede", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [
          op("committed", 1),
          op("attempted", 2, { state: "attempted" }),
          op("reconcile", 3, { state: "reconcile_only" }),
          op("attempted-orphan", 4, { state: "attempted", documentID: null }),
          op("reconcile-orphan", 5, { state: "reconcile_only", documentID: null })
        ]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(0)
        expect(yield* surviving(rows)).toEqual(keys(rows))
      })))

    it.effect("newest is by created_at first, then operation id on a tie", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [op("op-z", 4), op("op-a", 5), op("op-b", 5)]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(2)
        expect(yield* surviving(rows)).toEqual(["did:caller:1/op-b"])
      })))

    it.effect("on a created_at tie the caller decides, in code-point order (\"did:Z\" before \"did:a\")", () =>
      onStore({}, Effect.gen(function*() {
        const onDoc = { documentID: "doc-2", ownerDID: "did:owner:1" }
        // r is superseded for its caller by t (another owner) and, only by the
        // code-point tie-break, for its owner by s.
        const r = op("r", 5, { ...onDoc, callerDID: "did:Z" })
        const s = op("s", 5, { ...onDoc, callerDID: "did:a" })
        const t = op("t", 6, { ...onDoc, callerDID: "did:Z", ownerDID: "did:owner:2" })
        yield* seedOperations(r, s, t)
        expect(yield* collect(NOW, 10)).toBe(1)
        expect(yield* surviving([r, s, t])).toEqual(keys([s, t]))
      })))

    it.effect("finished rows linked to no document go, even when nothing supersedes them", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [op("orphan-committed", 1, { documentID: null }), op("orphan-dead", 2, { documentID: null, state: "dead" })]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(2)
        expect(yield* surviving(rows)).toEqual([])
      })))

    it.effect("a row under a live lease survives; an expired lease does not protect it", () =>
      onStore({}, Effect.gen(function*() {
        const orphan = (name: string, leaseToken: string | null, leaseExpiresAt: number | null) =>
          op(name, 1, { documentID: null, leaseToken, leaseExpiresAt })
        const kept = [
          orphan("live", "lease-1", NOW + 1),
          orphan("expires-now", "lease-2", NOW),
          orphan("no-expiry", "lease-3", null)
        ]
        const gone = [orphan("expired", "lease-4", NOW - 1), orphan("unleased", null, NOW + 1)]
        yield* seedOperations(...kept, ...gone)
        expect(yield* collect(NOW + 1_000, 10)).toBe(2)
        expect(yield* surviving([...kept, ...gone])).toEqual(keys(kept))
      })))

    it.effect("before is strict: a row updated exactly at before survives", () =>
      onStore({}, Effect.gen(function*() {
        const rows = [
          op("earlier", 1, { documentID: null, updatedAt: NOW - 1 }),
          op("at-before", 2, { documentID: null, updatedAt: NOW }),
          op("later", 3, { documentID: null, updatedAt: NOW + 1 })
        ]
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 10)).toBe(1)
        expect(yield* surviving(rows)).toEqual(["did:caller:1/at-before", "did:caller:1/later"])
      })))

    it.effect("limit caps a pass, and the oldest updated_at go first", () =>
      onStore({}, Effect.gen(function*() {
        const ages = [50, 10, 40, 20, 30]
        const rows = ages.map((age, i) => op(`age-${age}`, i, { documentID: null, updatedAt: NOW - 1_000 + age }))
        yield* seedOperations(...rows)
        expect(yield* collect(NOW, 2)).toBe(2)
        expect(yield* surviving(rows)).toEqual(["did:caller:1/age-30", "did:caller:1/age-40", "did:caller:1/age-50"])
        expect(yield* collect(NOW, 2)).toBe(2)
        expect(yield* surviving(rows)).toEqual(["did:caller:1/age-50"])
        expect(yield* collect(NOW, 2)).toBe(1)
        expect(yield* collect(NOW, 2)).toBe(0)
      })))

    it("deletes exactly what the contract's keep rule (written apart from the core's) picks, on random rows", async () => {
      await fc.assert(
        fc.asyncProperty(retentionCase, async ({ rows, before, limit }) => {
          const expected = [...expectedCollection(rows, before, limit, NOW)].sort()
          const deleted = await Effect.runPromise(
            onFreshStore(adapter, {}, Effect.gen(function*() {
              yield* seedOperations(...rows)
              const count = yield* collect(before, limit)
              const left = yield* surviving(rows)
              return { count, gone: keys(rows).filter((key) => !left.includes(key)) }
            })).pipe(Effect.withClock(clockFrom(() => NOW)))
          )
          expect(deleted).toEqual({ count: expected.length, gone: expected })
        }),
        // Each run builds a fresh store; Postgres migrates a fresh schema per run, so it gets fewer.
        { numRuns: propertyRuns(adapter.name === "postgres" ? 50 : 100) }
      )
    }, 120_000)
  })
}
