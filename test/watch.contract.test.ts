import {
  type ConnectorOperation,
  ConnectorStore,
  type ProjectionWatch,
  type PromiseConnectorStore,
  type VerificationStatus,
  type WinnerReaders
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore, type SqlTransaction, tableNames } from "@connector-store/sql-adapter"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { deferredRows } from "./support/contract/deferred.js"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import {
  at,
  failsChangingNothing,
  onFreshStore,
  seedOperations,
  seedWatches,
  storedOperation,
  storedWatch,
  succeedsChangingNothing
} from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

const id = identityOf()
/** Another watch in the same store, on another document, that no call here may touch. */
const bystander = watchRow({ sourceID: "src-bystander", documentID: "doc-bystander", verificationStatus: "verified" })

/** The row `openGeneration` must leave behind. */
const opened = (row: ProjectionWatch, winner: string | null, dueAt: number, now = NOW): ProjectionWatch => ({
  ...row,
  repairGeneration: row.repairGeneration + 1,
  verificationAttempts: 0,
  verificationStatus: "pending_verification",
  observedWinnerDigest: winner,
  nextAttemptAt: dueAt,
  claimedUntil: null,
  deferReason: null,
  version: row.version + 1,
  updatedAt: now
})

for (const adapter of adapters) {
  /** Runs `body` on a fresh store of this adapter, clock at `NOW`, winners read by `readers`. */
  const onStore = <A, E>(readers: WinnerReaders, body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, readers, Effect.zipRight(at(NOW), body))

  describe(`projection watches on ${adapter.name}`, () => {
    describe("armWatch", () => {
      it.effect("arming an identity that has no row is a noop for both reasons, reads no winner and writes nothing", () => {
        const winners = new Winners({ "doc-1": "w-new" })
        return onStore(winners.single(), Effect.gen(function*() {
          yield* seedWatches(bystander)
          const store = yield* ConnectorStore
          expect(yield* succeedsChangingNothing(store.armWatch(id, "manual", { dueAt: NOW }))).toBe("noop")
          expect(yield* succeedsChangingNothing(store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" })))
            .toBe("noop")
          expect(winners.singleReads).toEqual([])
        }))
      })

      const closedGates: ReadonlyArray<readonly [string, string | null | undefined, string]> = [
        ["a null triggering winner", null, "w-new"],
        ["no triggering winner", undefined, "w-new"],
        ["a triggering winner that is no longer the current winner", "w-new", "w-newer"],
        ["a triggering winner equal to the verified watermark", "digest-verified", "digest-verified"],
        ["a triggering winner equal to the observed watermark", "digest-observed", "digest-observed"]
      ]
      for (const status of ["verified", "pending_verification"] as const) {
        for (const [label, triggeringWinner, current] of closedGates) {
          it.effect(`ingress with ${label} is a noop on a ${status} watch`, () => {
            const row = watchRow({ verificationStatus: status, nextAttemptAt: status === "verified" ? null : NOW + 5_000 })
            const winners = new Winners({ "doc-1": current })
            return onStore(winners.single(), Effect.gen(function*() {
              yield* seedWatches(row)
              const store = yield* ConnectorStore
              expect(yield* succeedsChangingNothing(store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner }))).toBe("noop")
              expect(yield* storedWatch(id)).toEqual(row)
            }))
          })
        }
      }

      for (const status of ["verified", "repair_failed", "pending_verification"] as const) {
        it.effect(`manual opens a new generation of a ${status} watch against the current winner`, () => {
          const row = watchRow({
            verificationStatus: status,
            verificationAttempts: 2,
            repairGeneration: 4,
            claimedUntil: NOW + 5_000,
            deferReason: "auth"
          })
          const winners = new Winners({ "doc-1": "w-now" })
          return onStore(winners.single(), Effect.gen(function*() {
            yield* seedWatches(row, bystander)
            const store = yield* ConnectorStore
            expect(yield* store.armWatch(id, "manual", { dueAt: NOW + 1_000 })).toBe("opened")
            expect(yield* storedWatch(id)).toEqual(opened(row, "w-now", NOW + 1_000))
            expect(yield* storedWatch(bystander)).toEqual(bystander)
            expect(winners.singleReads).toEqual(["doc-1"])
          }))
        })
      }

      it.effect("manual opens even when the winner is no news, and against a null winner", () =>
        onStore(new Winners({ "doc-1": "digest-observed", "doc-2": null }).single(), Effect.gen(function*() {
          const settled = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
          const empty = watchRow({ sourceID: "src-2", documentID: "doc-2", verificationStatus: "repair_failed" })
          yield* seedWatches(settled, empty)
          const store = yield* ConnectorStore
          expect(yield* store.armWatch(id, "manual", { dueAt: NOW })).toBe("opened")
          expect(yield* store.armWatch({ ...id, sourceID: "src-2" }, "manual", { dueAt: NOW + 7 })).toBe("opened")
          expect(yield* storedWatch(id)).toEqual(opened(settled, "digest-observed", NOW))
          expect(yield* storedWatch(empty)).toEqual(opened(empty, null, NOW + 7))
        })))

      for (const status of ["verified", "repair_failed"] as const) {
        it.effect(`ingress with the current winner reopens a ${status} watch`, () => {
          const row = watchRow({ verificationStatus: status, nextAttemptAt: null, verificationAttempts: 3, repairGeneration: 2 })
          return onStore(new Winners({ "doc-1": "w-new" }).single(), Effect.gen(function*() {
            yield* seedWatches(row)
            const store = yield* ConnectorStore
            expect(yield* store.armWatch(id, "ingress", { dueAt: NOW + 500, triggeringWinner: "w-new" })).toBe("opened")
            expect(yield* storedWatch(id)).toEqual(opened(row, "w-new", NOW + 500))
          }))
        })
      }

      const coalescing: ReadonlyArray<readonly [string, number | null, number, number]> = [
        ["moves a later next attempt up to dueAt", NOW + 5_000, NOW + 2_000, NOW + 2_000],
        ["keeps an earlier next attempt", NOW + 1_000, NOW + 2_000, NOW + 1_000],
        ["schedules an unscheduled watch at dueAt", null, NOW + 2_000, NOW + 2_000]
      ]
      for (const [label, next, dueAt, expected] of coalescing) {
        it.effect(`ingress into a pending watch coalesces: ${label}`, () => {
          const row = watchRow({ nextAttemptAt: next, claimedUntil: NOW + 900, deferReason: "offline", verificationAttempts: 2 })
          return onStore(new Winners({ "doc-1": "w-new" }).single(), Effect.gen(function*() {
            yield* seedWatches(row)
            const store = yield* ConnectorStore
            expect(yield* store.armWatch(id, "ingress", { dueAt, triggeringWinner: "w-new" })).toBe("coalesced")
            expect(yield* storedWatch(id)).toEqual({ ...row, nextAttemptAt: expected, version: row.version + 1, updatedAt: NOW })
          }))
        })
      }

      it.effect("the finalize reason is refused with ReservedArmReason, before any read or write", () => {
        const winners = new Winners({ "doc-1": "w-new" })
        return onStore(winners.single(), Effect.gen(function*() {
          yield* seedWatches(watchRow())
          const store = yield* ConnectorStore
          const error = yield* failsChangingNothing(store.armWatch(id, "finalize" as never /* outside the type: an untyped caller */, { dueAt: NOW }))
          expect(error).toMatchObject({ _tag: "ReservedArmReason", reason: "finalize" })
          expect(winners.singleReads).toEqual([])
        }))
      })

      it.effect("a store without a winner reader refuses arm and verification with WinnerReaderMissing", () =>
        onStore({}, Effect.gen(function*() {
          yield* seedWatches(watchRow({ claimedUntil: null }))
          const store = yield* ConnectorStore
          expect(yield* failsChangingNothing(store.armWatch(id, "manual", { dueAt: NOW })))
            .toMatchObject({ _tag: "WinnerReaderMissing", method: "armWatch" })
          expect(yield* failsChangingNothing(store.recordVerification(id, {
            generation: 1,
            fetchedDigest: "x",
            maxAttempts: 3,
            dueAt: NOW
          }))).toMatchObject({ _tag: "WinnerReaderMissing", method: "recordVerification" })
        })))

      it.effect("a failing winner read fails arm with WinnerReadFailed and changes nothing", () =>
        onStore(new Winners().breakRead("doc-1").single(), Effect.gen(function*() {
          yield* seedWatches(watchRow({ verificationStatus: "verified" }))
          const store = yield* ConnectorStore
          expect(yield* failsChangingNothing(store.armWatch(id, "manual", { dueAt: NOW })))
            .toMatchObject({ _tag: "WinnerReadFailed", documentID: "doc-1" })
          expect(yield* failsChangingNothing(store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w" })))
            .toMatchObject({ _tag: "WinnerReadFailed", documentID: "doc-1" })
        })))

      it.effect("a store with only a batch winner reader reads single winners through it", () => {
        const winners = new Winners({ "doc-1": "w-new" })
        return onStore(winners.batch(), Effect.gen(function*() {
          const row = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
          yield* seedWatches(row)
          const store = yield* ConnectorStore
          expect(yield* store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" })).toBe("opened")
          expect(yield* storedWatch(id)).toEqual(opened(row, "w-new", NOW))
          expect(winners.batchReads).toEqual([["doc-1"]])
        }))
      })
    })

    describe("claimWatchAttempt", () => {
      const claim = { until: NOW + 30_000, generation: 1, now: NOW }

      const claimable: ReadonlyArray<readonly [string, Partial<ProjectionWatch>]> = [
        ["a due, unclaimed pending watch", {}],
        ["a watch due exactly now", { nextAttemptAt: NOW }],
        ["a watch whose claim expired", { claimedUntil: NOW - 1 }],
        ["a watch whose claim expires exactly now", { claimedUntil: NOW }]
      ]
      for (const [label, patch] of claimable) {
        it.effect(`claims ${label}`, () =>
          onStore({}, Effect.gen(function*() {
            const row = watchRow(patch)
            yield* seedWatches(row)
            const store = yield* ConnectorStore
            expect(yield* store.claimWatchAttempt(id, claim)).toBe(true)
            expect(yield* storedWatch(id)).toEqual({ ...row, claimedUntil: claim.until, version: row.version + 1, updatedAt: NOW })
          })))
      }

      const refused: ReadonlyArray<readonly [string, Partial<ProjectionWatch> | undefined]> = [
        ["a verified watch", { verificationStatus: "verified" }],
        ["a repair_failed watch", { verificationStatus: "repair_failed" }],
        ["a watch of another generation", { repairGeneration: 2 }],
        ["a watch with no next attempt", { nextAttemptAt: null }],
        ["a watch not yet due", { nextAttemptAt: NOW + 1 }],
        ["a watch under a live claim", { claimedUntil: NOW + 1 }],
        ["an identity with no row", undefined]
      ]
      for (const [label, patch] of refused) {
        it.effect(`refuses ${label} and changes nothing`, () =>
          onStore({}, Effect.gen(function*() {
            yield* seedWatches(patch === undefined ? bystander : watchRow(patch))
            const store = yield* ConnectorStore
            expect(yield* succeedsChangingNothing(store.claimWatchAttempt(id, claim))).toBe(false)
          })))
      }

      it.effect("a second claim in the same window is refused; after the window it succeeds", () =>
        onStore({}, Effect.gen(function*() {
          yield* seedWatches(watchRow())
          const store = yield* ConnectorStore
          expect(yield* store.claimWatchAttempt(id, claim)).toBe(true)
          expect(yield* store.claimWatchAttempt(id, { ...claim, until: NOW + 60_000, now: NOW + 29_999 })).toBe(false)
          expect(yield* store.claimWatchAttempt(id, { ...claim, until: NOW + 90_000, now: NOW + 30_000 })).toBe(true)
          expect((yield* storedWatch(id)).claimedUntil).toBe(NOW + 90_000)
        })))
    })

    describe("deferWatch", () => {
      const held = watchRow({ claimedUntil: NOW + 30_000, deferReason: "auth" })
      const defer = { generation: 1, claimedUntil: NOW + 30_000, nextAttemptAt: NOW + 60_000 }

      it.effect("the claim holder pushes the attempt out with a reason and releases the claim", () =>
        onStore({}, Effect.gen(function*() {
          yield* seedWatches(held)
          const store = yield* ConnectorStore
          expect(yield* store.deferWatch(id, { ...defer, reason: "offline" })).toBe(true)
          expect(yield* storedWatch(id)).toEqual({
            ...held,
            nextAttemptAt: NOW + 60_000,
            deferReason: "offline",
            claimedUntil: null,
            version: held.version + 1,
            updatedAt: NOW
          })
        })))

      it.effect("a deferral without a reason clears the stored reason", () =>
        onStore({}, Effect.gen(function*() {
          yield* seedWatches(held)
          const store = yield* ConnectorStore
          expect(yield* store.deferWatch(id, defer)).toBe(true)
          expect(yield* storedWatch(id)).toMatchObject({ deferReason: null, claimedUntil: null, nextAttemptAt: NOW + 60_000 })
        })))

      const refused: ReadonlyArray<readonly [string, ProjectionWatch | undefined]> = [
        ["a caller holding another claim", { ...held, claimedUntil: NOW + 29_999 }],
        ["an unclaimed watch", { ...held, claimedUntil: null }],
        ["a watch of another generation", { ...held, repairGeneration: 2 }],
        ["a verified watch", { ...held, verificationStatus: "verified" }],
        ["an identity with no row", undefined]
      ]
      for (const [label, row] of refused) {
        it.effect(`refuses ${label} and changes nothing`, () =>
          onStore({}, Effect.gen(function*() {
            yield* seedWatches(row ?? bystander)
            const store = yield* ConnectorStore
            expect(yield* succeedsChangingNothing(store.deferWatch(id, { ...defer, reason: "offline" }))).toBe(false)
          })))
      }
    })

    describe("recordVerification", () => {
      const claimed = watchRow({ claimedUntil: NOW + 30_000, verificationAttempts: 1, deferReason: "offline" })
      const result = { generation: 1, claimedUntil: NOW + 30_000, fetchedDigest: "w-now", maxAttempts: 3, dueAt: NOW + 60_000 }

      it.effect("a result for an identity with no row is stale-generation and reads nothing", () => {
        const winners = new Winners({ "doc-1": "w-now" })
        return onStore(winners.single(), Effect.gen(function*() {
          yield* seedWatches(bystander)
          const store = yield* ConnectorStore
          expect(yield* succeedsChangingNothing(store.recordVerification(id, result))).toBe("stale-generation")
          expect(winners.singleReads).toEqual([])
        }))
      })

      it.effect("a result for another generation is stale-generation before the winner is read", () =>
        // The reader is broken: reaching it would fail the call instead.
        onStore(new Winners().breakRead("doc-1").single(), Effect.gen(function*() {
          yield* seedWatches({ ...claimed, repairGeneration: 2 })
          const store = yield* ConnectorStore
          expect(yield* succeedsChangingNothing(store.recordVerification(id, result))).toBe("stale-generation")
        })))

      for (const [label, stored] of [["another claim", NOW + 1], ["no claim", null]] as const) {
        it.effect(`a result from a verifier whose claim is gone (row holds ${label}) is stale-claim`, () =>
          onStore(new Winners({ "doc-1": "w-now" }).single(), Effect.gen(function*() {
            yield* seedWatches({ ...claimed, claimedUntil: stored })
            const store = yield* ConnectorStore
            expect(yield* succeedsChangingNothing(store.recordVerification(id, result))).toBe("stale-claim")
          })))
      }

      it.effect("a fetched digest equal to the current winner verifies: both watermarks become the winner", () =>
        onStore(new Winners({ "doc-1": "w-now" }).single(), Effect.gen(function*() {
          yield* seedWatches(claimed)
          const store = yield* ConnectorStore
          expect(yield* store.recordVerification(id, result)).toBe("verified")
          expect(yield* storedWatch(id)).toEqual({
            ...claimed,
            verificationStatus: "verified",
            verifiedStateDigest: "w-now",
            observedWinnerDigest: "w-now",
            nextAttemptAt: null,
            claimedUntil: null,
            deferReason: null,
            version: claimed.version + 1,
            updatedAt: NOW
          })
        })))

      it.effect("a result without a claim skips the claim gate", () =>
        onStore(new Winners({ "doc-1": "w-now" }).single(), Effect.gen(function*() {
          yield* seedWatches({ ...claimed, claimedUntil: NOW + 5 })
          const store = yield* ConnectorStore
          const { claimedUntil: _, ...unclaimed } = result
          expect(yield* store.recordVerification(id, unclaimed)).toBe("verified")
          expect(yield* store.recordVerification({ ...id, sourceID: "none" }, { ...unclaimed, claimedUntil: null }))
            .toBe("stale-generation")
        })))

      const mismatches: ReadonlyArray<readonly [string, string | null, string | null]> = [
        ["a fetched digest other than the current winner", "w-fetched", "w-now"],
        ["a null fetched digest, even when the winner is null too", null, null]
      ]
      for (const [label, fetchedDigest, winner] of mismatches) {
        it.effect(`${label} is pending: an attempt spent, rescheduled, watermarks untouched`, () =>
          onStore(new Winners({ "doc-1": winner }).single(), Effect.gen(function*() {
            yield* seedWatches(claimed)
            const store = yield* ConnectorStore
            expect(yield* store.recordVerification(id, { ...result, fetchedDigest })).toBe("pending")
            expect(yield* storedWatch(id)).toEqual({
              ...claimed,
              verificationAttempts: 2,
              nextAttemptAt: result.dueAt,
              claimedUntil: null,
              deferReason: null,
              version: claimed.version + 1,
              updatedAt: NOW
            })
          })))
      }

      for (const [attempts, maxAttempts] of [[2, 3], [0, 1], [5, 3]] as const) {
        it.effect(`a mismatch at attempt ${attempts + 1} of ${maxAttempts} gives the generation up as repair_failed`, () =>
          onStore(new Winners({ "doc-1": "w-now" }).single(), Effect.gen(function*() {
            const row = { ...claimed, verificationAttempts: attempts }
            yield* seedWatches(row)
            const store = yield* ConnectorStore
            expect(yield* store.recordVerification(id, { ...result, fetchedDigest: "w-fetched", maxAttempts }))
              .toBe("repair_failed")
            expect(yield* storedWatch(id)).toEqual({
              ...row,
              verificationStatus: "repair_failed" satisfies VerificationStatus,
              verificationAttempts: attempts + 1,
              // The winner the generation was opened against stays: a winner that moved is still news.
              observedWinnerDigest: row.observedWinnerDigest,
              nextAttemptAt: null,
              claimedUntil: null,
              deferReason: null,
              version: row.version + 1,
              updatedAt: NOW
            })
          })))
      }

      it.effect("a failing winner read fails the verification with WinnerReadFailed and changes nothing", () =>
        onStore(new Winners().breakRead("doc-1").single(), Effect.gen(function*() {
          yield* seedWatches(claimed)
          const store = yield* ConnectorStore
          expect(yield* failsChangingNothing(store.recordVerification(id, result)))
            .toMatchObject({ _tag: "WinnerReadFailed", documentID: "doc-1" })
        })))
    })

    describe("reads", () => {
      it.effect("getWatch returns the stored row field for field, and None for an unknown identity", () =>
        onStore({}, Effect.gen(function*() {
          const full = watchRow({ claimedUntil: NOW + 1, deferReason: "auth", nextAttemptAt: 9_007_199_254_740_991 })
          const sparse = watchRow({
            sourceID: "src-sparse",
            documentID: "doc-sparse",
            verifiedStateDigest: null,
            observedWinnerDigest: null,
            nextAttemptAt: null,
            verificationStatus: "repair_failed"
          })
          yield* seedWatches(full, sparse)
          const store = yield* ConnectorStore
          expect(yield* store.getWatch(id)).toEqual(Option.some(full))
          expect(yield* store.getWatch({ ...id, sourceID: "src-sparse" })).toEqual(Option.some(sparse))
          expect(yield* store.getWatch({ ...id, accountKey: "acct-other" })).toEqual(Option.none())
        })))

      it.effect("getWatchByDocument finds the watch of a document, and None for an unwatched one", () =>
        onStore({}, Effect.gen(function*() {
          const row = watchRow({ documentID: "doc-7" })
          yield* seedWatches(row, bystander)
          const store = yield* ConnectorStore
          expect(yield* store.getWatchByDocument("doc-7")).toEqual(Option.some(row))
          expect(yield* store.getWatchByDocument("doc-unwatched")).toEqual(Option.none())
        })))

      it.effect("listWatchesByDocuments answers a 70,000-id list (beyond every driver's parameter limit)", () =>
        onStore({}, Effect.gen(function*() {
          const documentIDs = Array.from({ length: 70_000 }, (_, i) => `doc-${i}`)
          // Positions around chunk and driver limits: SQLite 32,766, Postgres 65,535.
          const listed = [0, 499, 500, 32_765, 32_766, 32_767, 65_534, 65_535, 65_536, 69_999]
            .map((i) => watchRow({ sourceID: `src-${i}`, documentID: `doc-${i}` }))
          // A second owner's watch on a listed document is returned too.
          const shared = watchRow({ ownerDID: "did:owner:2", documentID: "doc-65535" })
          const unlisted = ["doc-70000", "doc-x", "elsewhere"].map((documentID, i) =>
            watchRow({ sourceID: `src-unlisted-${i}`, documentID })
          )
          yield* seedWatches(...listed, shared, ...unlisted)
          const store = yield* ConnectorStore
          const key = (row: ProjectionWatch) => `${row.documentID}|${row.ownerDID}|${row.sourceID}`
          const found = yield* store.listWatchesByDocuments([...documentIDs, "doc-0", "doc-69999"])
          expect([...found].sort((a, b) => key(a).localeCompare(key(b))))
            .toEqual([...listed, shared].sort((a, b) => key(a).localeCompare(key(b))))
          expect(yield* store.listWatchesByDocuments([])).toEqual([])
        })), 120_000)
    })

    describe("resume deferred work", () => {
      const T = NOW + 10
      const resumedWatch = (row: ProjectionWatch): ProjectionWatch =>
        ({ ...row, nextAttemptAt: T, deferReason: null, version: row.version + 1, updatedAt: T })
      const resumedOperation = (row: ConnectorOperation): ConnectorOperation =>
        ({ ...row, nextAttemptAt: T, deferReason: null, version: row.version + 1, updatedAt: T })

      /** Checks every deferred row against whether `scope` should have resumed it. */
      const resumeCase = (
        label: string,
        scope: "offline" | "auth",
        resume: (store: ConnectorStore["Type"]) => Effect.Effect<void, unknown>
      ) =>
        it.effect(label, () =>
          onStore({}, Effect.gen(function*() {
            const rows = deferredRows()
            yield* seedWatches(...rows.watches.map((c) => c.row))
            yield* seedOperations(...rows.operations.map((c) => c.row))
            yield* resume(yield* ConnectorStore)
            for (const c of rows.watches) {
              expect(yield* storedWatch(c.row), c.row.sourceID).toEqual(c[scope] ? resumedWatch(c.row) : c.row)
            }
            for (const c of rows.operations) {
              expect(yield* storedOperation(c.row), c.row.operationID).toEqual(c[scope] ? resumedOperation(c.row) : c.row)
            }
          })))

      resumeCase(
        "resumeOfflineDeferred makes every offline-deferred pending watch and attempted operation due now",
        "offline",
        (store) => store.resumeOfflineDeferred(T)
      )
      resumeCase(
        "resumeAuthDeferred reaches only the owner's listed connectors, and only auth deferrals",
        "auth",
        (store) => store.resumeAuthDeferred({ ownerDID: "did:owner:1", connectorNames: ["gcal", "jira"], now: T })
      )

      it.effect("resumeAuthDeferred with no connectors changes nothing", () =>
        onStore({}, Effect.gen(function*() {
          const rows = deferredRows()
          yield* seedWatches(...rows.watches.map((c) => c.row))
          yield* seedOperations(...rows.operations.map((c) => c.row))
          const store = yield* ConnectorStore
          yield* succeedsChangingNothing(store.resumeAuthDeferred({ ownerDID: "did:owner:1", connectorNames: [], now: T }))
        })))
    })

    describe("the Promise API", () => {
      it("runs a watch cycle, and hands winner readers the call's own transaction", async () => {
        const connection = await adapter.connection()
        const table = tableNames(connection.tablePrefix).projectionWatch
        const versionsSeen: Array<number> = []
        let winner = "w1"
        const readWinner = async (documentID: string, tx: unknown) => {
          if (adapter.name === "memory") {
            expect(tx).toEqual({ adapter: "memory" })
          } else {
            // Inside the call's transaction the row it locked reads (and on
            // Postgres relocks without waiting); from any other connection
            // SQLite would wait for the write lock and Postgres would refuse NOWAIT.
            const sql = tx as SqlTransaction
            const rows = sql.dialect === "pg"
              ? await sql.query<{ version: unknown }>(`SELECT version FROM ${table} WHERE document_id = $1 FOR UPDATE NOWAIT`, [documentID])
              : await sql.query<{ version: unknown }>(`SELECT version FROM ${table} WHERE document_id = ?`, [documentID])
            versionsSeen.push(Number(rows[0]?.version))
          }
          return winner
        }
        const store: PromiseConnectorStore<unknown> = adapter.name === "memory"
          ? openMemoryConnectorStore({ readWinner, now: () => NOW })
          : await openConnectorStore({ ...connection, readWinner, now: () => NOW })
        try {
          const row = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
          await store.runEffect(seedWatches(row) as unknown as Effect.Effect<void, unknown, ConnectorStore>)
          expect(await store.armWatch(id, "manual", { dueAt: NOW })).toBe("opened")
          const claim = { until: NOW + 1_000, generation: row.repairGeneration + 1, now: NOW }
          expect(await store.claimWatchAttempt(id, claim)).toBe(true)
          expect(await store.claimWatchAttempt(id, claim)).toBe(false)
          expect(await store.recordVerification(id, {
            generation: claim.generation,
            claimedUntil: claim.until,
            fetchedDigest: "w1",
            maxAttempts: 3,
            dueAt: NOW
          })).toBe("verified")
          expect(await store.getWatch(id)).toEqual({
            ...row,
            repairGeneration: claim.generation,
            verificationAttempts: 0,
            verifiedStateDigest: "w1",
            observedWinnerDigest: "w1",
            version: row.version + 3,
            updatedAt: NOW
          })
          if (adapter.name !== "memory") expect(versionsSeen).toEqual([row.version, row.version + 2])

          winner = "w2"
          const batch = await store.listDueOperations(NOW, { readWinners: async (ids: ReadonlyArray<string>) => new Map(ids.map((d) => [d, winner])) })
          expect(batch.watches.map((w) => w.sourceID)).toEqual([id.sourceID])
          const asRecord = await store.listDueOperations(NOW, { readWinners: (ids: ReadonlyArray<string>) => Object.fromEntries(ids.map((d) => [d, "w1"])) })
          expect(asRecord).toEqual({ operations: [], watches: [], corrupt: [] })
          expect(await store.getWatch({ ...id, sourceID: "src-none" })).toBeNull()
          expect(await store.getWatchByDocument("doc-none")).toBeNull()
          expect(await store.getWatchByDocument("doc-1")).toMatchObject({ sourceID: id.sourceID })
        } finally {
          await store.close()
        }
      })
    })
  })
}
