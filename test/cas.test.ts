import {
  ConnectorStore,
  formatWatchIdentity,
  PersistenceError,
  type ProjectionWatch,
  type WinnerReaders
} from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { identityOf, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { interferedStore as interferedOn, type UpdatePlan } from "./support/contract/interference.js"
import {
  at,
  failsChangingNothing,
  seedOperations,
  seedWatches,
  storedOperation,
  storedWatch
} from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** The documented retry budget of a read-decide-write (`CAS_ATTEMPTS`), stated here on its own. */
const CAS_ATTEMPTS = 6

const id = identityOf()

/** Real writes from the given call on; before it, each `update` loses after another writer applies `change`. */
const losesTo = (lostCalls: number, change: (row: ProjectionWatch) => ProjectionWatch): UpdatePlan =>
  (call, next, expected, { concurrently, write }) => {
    if (call > lostCalls) return write(next, expected)
    concurrently(next, change)
    return Effect.succeed(false)
  }

/** Each of the first `lostCalls` updates writes its row, then reports a lost race anyway. */
const losesAfterWriting = (lostCalls: number): UpdatePlan => (call, next, expected, { write }) =>
  call > lostCalls ? write(next, expected) : Effect.as(write(next, expected), false)

/** The opened generation another writer put in place. */
const reopenedBy = (winner: string) => (row: ProjectionWatch): ProjectionWatch => ({
  ...row,
  repairGeneration: row.repairGeneration + 1,
  verificationStatus: "pending_verification",
  verificationAttempts: 0,
  observedWinnerDigest: winner,
  nextAttemptAt: NOW + 123,
  claimedUntil: null,
  deferReason: null,
  updatedAt: NOW - 1
})

for (const adapter of adapters) {
  const interferedStore = (plan: UpdatePlan, readers: WinnerReaders) => interferedOn(plan, readers, adapter.layer)

  describe(`read-decide-write under lost races on ${adapter.name}`, () => {
    it.effect("a coalesce retried after a concurrent change uses the fresh next attempt, not the stale one", () => {
      const winners = new Winners({ "doc-1": "w-new" })
      const row = watchRow({ nextAttemptAt: NOW + 5_000 })
      const store = interferedStore(losesTo(1, (r) => ({ ...r, nextAttemptAt: NOW + 3_000 })), winners.single())
      return Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(row)
        const outcome = yield* (yield* ConnectorStore).armWatch(id, "ingress", { dueAt: NOW + 4_000, triggeringWinner: "w-new" })
        expect(outcome).toBe("coalesced")
        // From the first read the decision was NOW+4000; from the fresh row it is min(NOW+3000, NOW+4000).
        expect(yield* storedWatch(id)).toEqual({ ...row, nextAttemptAt: NOW + 3_000, version: row.version + 2, updatedAt: NOW })
        expect([store.updates(), store.concurrentWrites()]).toEqual([2, 1])
        expect(winners.singleReads).toEqual(["doc-1", "doc-1"])
      }).pipe(Effect.provide(store.layer))
    })

    it.effect("a concurrent re-open turns a retried ingress into a noop and keeps the other writer's row", () => {
      const row = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
      const store = interferedStore(losesTo(1, reopenedBy("w-new")), new Winners({ "doc-1": "w-new" }).single())
      return Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(row)
        const outcome = yield* (yield* ConnectorStore).armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" })
        expect(outcome).toBe("noop")
        expect(yield* storedWatch(id)).toEqual({ ...reopenedBy("w-new")(row), version: row.version + 1 })
        expect(store.updates()).toBe(1)
      }).pipe(Effect.provide(store.layer))
    })

    it.effect("a retried verification re-reads the winner: a winner that moved meanwhile is not verified", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      const row = watchRow({ claimedUntil: null })
      const plan: UpdatePlan = (call, next, expected, tools) => {
        if (call === 1) winners.set("doc-1", "w-2")
        return losesTo(1, (r) => ({ ...r, nextAttemptAt: NOW + 1 }))(call, next, expected, tools)
      }
      const store = interferedStore(plan, winners.single())
      return Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(row)
        const outcome = yield* (yield* ConnectorStore).recordVerification(id, {
          generation: 1,
          fetchedDigest: "w-1",
          maxAttempts: 5,
          dueAt: NOW + 60_000
        })
        expect(outcome).toBe("pending")
        expect(yield* storedWatch(id)).toEqual({
          ...row,
          verificationAttempts: row.verificationAttempts + 1,
          nextAttemptAt: NOW + 60_000,
          version: row.version + 2,
          updatedAt: NOW
        })
      }).pipe(Effect.provide(store.layer))
    })

    it.effect("a concurrent re-arm makes a retried verification stale-generation", () => {
      const row = watchRow()
      const store = interferedStore(losesTo(1, reopenedBy("w-x")), new Winners({ "doc-1": "w-1" }).single())
      return Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(row)
        const outcome = yield* (yield* ConnectorStore).recordVerification(id, {
          generation: 1,
          fetchedDigest: "w-1",
          maxAttempts: 5,
          dueAt: NOW
        })
        expect(outcome).toBe("stale-generation")
        expect(yield* storedWatch(id)).toEqual({ ...reopenedBy("w-x")(row), version: row.version + 1 })
      }).pipe(Effect.provide(store.layer))
    })

    it.effect(`${CAS_ATTEMPTS - 1} lost tries then a won one apply the decision exactly once`, () => {
      const row = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
      const store = interferedStore(losesAfterWriting(CAS_ATTEMPTS - 1), new Winners({ "doc-1": "w" }).single())
      return Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(row)
        expect(yield* (yield* ConnectorStore).armWatch(id, "manual", { dueAt: NOW })).toBe("opened")
        const stored = yield* storedWatch(id)
        expect([stored.version, stored.repairGeneration]).toEqual([row.version + 1, row.repairGeneration + 1])
        expect(store.updates()).toBe(CAS_ATTEMPTS)
      }).pipe(Effect.provide(store.layer))
    })

    // The transitions that can lose a race (the locked ones read the winner;
    // their lost writes are rolled back). claimWatchAttempt and deferWatch
    // are one guarded write each (WatchRepository.claimAttempt / deferAttempt):
    // they have no race to lose, and never call update.
    const exhausting: ReadonlyArray<
      readonly [string, UpdatePlan, (store: ConnectorStore["Type"]) => Effect.Effect<unknown, unknown>]
    > = [
      ["armWatch", losesAfterWriting(Number.POSITIVE_INFINITY), (s) => s.armWatch(id, "manual", { dueAt: NOW })],
      [
        "recordVerification",
        losesAfterWriting(Number.POSITIVE_INFINITY),
        (s) => s.recordVerification(id, { generation: 1, fetchedDigest: "w", maxAttempts: 3, dueAt: NOW })
      ]
    ]
    for (const [method, plan, call] of exhausting) {
      it.effect(`${method} gives up after ${CAS_ATTEMPTS} lost tries with ConcurrentUpdateExhausted, applying nothing`, () => {
        const row = watchRow({ claimedUntil: NOW + 5, nextAttemptAt: NOW - 1 })
        const winners = new Winners({ "doc-1": "w" })
        const store = interferedStore(plan, winners.single())
        return Effect.gen(function*() {
          yield* at(NOW + 5)
          yield* seedWatches(row)
          const error = yield* failsChangingNothing(call(yield* ConnectorStore))
          expect(error).toMatchObject({
            _tag: "ConcurrentUpdateExhausted",
            method,
            identity: formatWatchIdentity(id),
            attempts: CAS_ATTEMPTS
          })
          expect(String(error)).toContain(formatWatchIdentity(id))
          expect(store.updates()).toBe(CAS_ATTEMPTS)
          if (method === "armWatch" || method === "recordVerification") {
            expect(winners.singleReads.length).toBe(CAS_ATTEMPTS)
          }
        }).pipe(Effect.provide(store.layer))
      })
    }

    it.effect("when every try loses to another writer, only the other writers' changes remain", () => {
      const row = watchRow({ nextAttemptAt: NOW + 5_000 })
      const store = interferedStore(
        losesTo(Number.POSITIVE_INFINITY, (r) => ({ ...r, nextAttemptAt: r.nextAttemptAt! - 1 })),
        new Winners({ "doc-1": "w-new" }).single()
      )
      return Effect.gen(function*() {
        yield* at(NOW)
        yield* seedWatches(row)
        const error = yield* Effect.flip((yield* ConnectorStore).armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" }))
        expect(error).toMatchObject({ _tag: "ConcurrentUpdateExhausted", identity: formatWatchIdentity(id) })
        expect(yield* storedWatch(id)).toEqual({
          ...row,
          nextAttemptAt: NOW + 5_000 - CAS_ATTEMPTS,
          version: row.version + CAS_ATTEMPTS
        })
      }).pipe(Effect.provide(store.layer))
    })
  })

  describe(`transactions spanning several rows on ${adapter.name}`, () => {
    const T = NOW + 10
    const deferredWatch = (name: string) =>
      watchRow({ sourceID: name, documentID: `doc-${name}`, deferReason: "offline", nextAttemptAt: NOW + 99 })
    const first = deferredWatch("first")
    const second = deferredWatch("second")
    const operation = operationRow({ state: "attempted", deferReason: "offline", nextAttemptAt: NOW + 99 })

    it.effect("a write failing mid-resume rolls back the resume's earlier writes", () => {
      let watchWrites = 0
      const plan: UpdatePlan = (_, next, expected, { write }) =>
        ++watchWrites === 2
          ? Effect.fail(new PersistenceError({ operation: "watch.update", cause: new Error("disk full") }))
          : write(next, expected)
      const store = interferedStore(plan, {})
      return Effect.gen(function*() {
        yield* seedWatches(first, second)
        yield* seedOperations(operation)
        const error = yield* failsChangingNothing((yield* ConnectorStore).resumeOfflineDeferred(T))
        expect(error).toMatchObject({ _tag: "PersistenceError", operation: "watch.update" })
        expect(yield* storedOperation(operation)).toEqual(operation)
      }).pipe(Effect.provide(store.layer))
    })

    it.effect("a resume that loses a race on its second row is retried whole and applies each row once", () => {
      let watchWrites = 0
      let lostOn: string | undefined
      const plan: UpdatePlan = (_, next, expected, { concurrently, write }) => {
        if (++watchWrites !== 2) return write(next, expected)
        lostOn = next.sourceID
        // Another runner took this watch's deferral away before our write landed.
        concurrently(next, (row) => ({ ...row, deferReason: null, nextAttemptAt: NOW + 7 }))
        return Effect.succeed(false)
      }
      const store = interferedStore(plan, {})
      return Effect.gen(function*() {
        yield* seedWatches(first, second)
        yield* seedOperations(operation)
        yield* (yield* ConnectorStore).resumeOfflineDeferred(T)
        const resumed = { nextAttemptAt: T, deferReason: null, updatedAt: T }
        const [lost, won] = lostOn === second.sourceID ? [second, first] : [first, second]
        // Try 1: two watch writes, the second lost; try 2: only the still-deferred watch.
        expect(watchWrites).toBe(3)
        expect(yield* storedWatch(won)).toEqual({ ...won, ...resumed, version: won.version + 1 })
        expect(yield* storedWatch(lost)).toEqual({ ...lost, deferReason: null, nextAttemptAt: NOW + 7, version: lost.version + 1 })
        expect(yield* storedOperation(operation)).toEqual({ ...operation, ...resumed, version: operation.version + 1 })
      }).pipe(Effect.provide(store.layer))
    })
  })
}
