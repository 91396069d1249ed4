import {
  type ConnectorOperation,
  decideClaim,
  decideDefer,
  decideMarkSent,
  DEFAULT_OPERATION_POLICY,
  OperationRepository,
  type OperationState,
  type DeferReason,
  type PersistenceError,
  type ProjectionWatch,
  type VerificationStatus,
  WatchRepository
} from "@connector-store/core"
import * as fc from "fast-check"
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { identityOfRow, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/**
 * claimWatchAttempt and deferWatch are one guarded write each
 * (`WatchRepository.claimAttempt` / `deferAttempt`), not a read, the pure
 * decision and a versioned write. These properties are what lets the guard
 * stand in for the decision: on every adapter, for any stored row and any
 * input, the guarded write changes the row exactly when `decideClaim` /
 * `decideDefer` decides a write, and then leaves exactly the decision's
 * `next`; otherwise it answers false and leaves the row as it was.
 *
 * markOperationSent's common case is one guarded write as well
 * (`OperationRepository.markSent`): it must write exactly when
 * `decideMarkSent` decides "sent", and then exactly that decision's `next`;
 * every other branch is decided from a read, so there it must write nothing.
 *
 * Times are drawn from a few ticks around one instant, so every boundary
 * (due exactly now, a claim expiring exactly now, equal claims) is hit often.
 */
const adapters = await adaptersUnderTest()

const tick = fc.integer({ min: -2, max: 2 }).map((n) => NOW + n)
const statuses: ReadonlyArray<VerificationStatus> = ["pending_verification", "verified", "repair_failed"]
const reasons: ReadonlyArray<DeferReason | null> = [null, "offline", "auth"]

const storedRow = fc.record({
  verificationStatus: fc.constantFrom(...statuses),
  repairGeneration: fc.integer({ min: 0, max: 2 }),
  nextAttemptAt: fc.option(tick, { nil: null }),
  claimedUntil: fc.option(tick, { nil: null }),
  deferReason: fc.constantFrom(...reasons),
  version: fc.integer({ min: 0, max: 3 })
})

const claimCase = fc.record({
  stored: fc.option(storedRow, { nil: undefined }),
  generation: fc.integer({ min: 0, max: 2 }),
  until: tick,
  now: tick,
  writtenAt: tick
})

const deferCase = fc.record({
  stored: fc.option(storedRow, { nil: undefined }),
  generation: fc.integer({ min: 0, max: 2 }),
  claimedUntil: tick,
  nextAttemptAt: tick,
  reason: fc.option(fc.constantFrom(...reasons), { nil: undefined }),
  now: tick
})

const states: ReadonlyArray<OperationState> = ["attempted", "committed", "dead", "reconcile_only"]
const tokens = ["tok-a", "tok-b"]

const markSentCase = fc.record({
  stored: fc.option(fc.record({
    state: fc.constantFrom(...states),
    leaseToken: fc.constantFrom(null, ...tokens),
    sendMarker: fc.constantFrom(null, "other", ...tokens),
    attempts: fc.integer({ min: 0, max: 4 }),
    inDoubtSince: fc.option(tick, { nil: null }),
    version: fc.integer({ min: 0, max: 3 })
  }), { nil: undefined }),
  token: fc.constantFrom(...tokens),
  maxAttempts: fc.integer({ min: 1, max: 4 }),
  now: tick
})

for (const adapter of adapters) {
  const runs = 500
  describe.runIf(adapter.name !== "postgres" || pgAvailable)(
    `guarded writes agree with the pure decisions on ${adapter.name}`,
    () => {
      const runtime = ManagedRuntime.make(
        adapter.layer({}) as Layer.Layer<StoreServices, PersistenceError>
      )
      afterAll(() => runtime.dispose())
      let serial = 0

      /** Seeds `stored` (or nothing) under a fresh identity; returns the row the decision sees. */
      const seed = (stored: Partial<ProjectionWatch> | undefined) =>
        Effect.gen(function*() {
          const repo = yield* WatchRepository
          const n = ++serial
          const row = watchRow({ sourceID: `src-${n}`, documentID: `doc-${n}`, ...stored })
          if (stored !== undefined && !(yield* repo.insert(row))) return yield* Effect.dieMessage("seed refused")
          return { row: stored === undefined ? undefined : row, identity: identityOfRow(row) }
        })

      it("claimAttempt writes exactly what decideClaim decides", async () => {
        await fc.assert(
          fc.asyncProperty(claimCase, (c) =>
            runtime.runPromise(Effect.gen(function*() {
              const repo = yield* WatchRepository
              const { row, identity } = yield* seed(c.stored)
              const input = { generation: c.generation, until: c.until }
              const decision = decideClaim(row, input, c.now, c.writtenAt)
              const claimed = yield* repo.claimAttempt(identity, input, c.now, c.writtenAt)
              const after = Option.getOrUndefined(yield* repo.get(identity))
              expect(claimed).toBe(decision.outcome === "claimed")
              expect(after).toEqual(decision.next ?? row)
            }))),
          { numRuns: runs }
        )
      })

      it("markSent writes exactly when decideMarkSent decides sent, and exactly its row", async () => {
        await fc.assert(
          fc.asyncProperty(markSentCase, (c) =>
            runtime.runPromise(Effect.gen(function*() {
              const repo = yield* OperationRepository
              const n = ++serial
              const key = { callerDID: "did:caller:prop", operationID: `op-${n}` }
              const row: ConnectorOperation | undefined = c.stored === undefined
                ? undefined
                : operationRow({ ...key, nodeKey: `node-prop-${n}`, ...c.stored })
              if (row !== undefined && !(yield* repo.insert(row))) return yield* Effect.dieMessage("seed refused")
              const decision = decideMarkSent(row, c.token, { ...DEFAULT_OPERATION_POLICY, maxAttempts: c.maxAttempts }, c.now)
              const written = Option.getOrUndefined(yield* repo.markSent(key, c.token, c.maxAttempts, c.now))
              const after = Option.getOrUndefined(yield* repo.get(key))
              if (decision.result.outcome === "sent") {
                expect(written).toEqual(decision.next)
                expect(after).toEqual(decision.next)
              } else {
                expect(written).toBeUndefined()
                expect(after).toEqual(row)
              }
            }))),
          { numRuns: runs }
        )
      })

      it("deferAttempt writes exactly what decideDefer decides", async () => {
        await fc.assert(
          fc.asyncProperty(deferCase, (c) =>
            runtime.runPromise(Effect.gen(function*() {
              const repo = yield* WatchRepository
              const { row, identity } = yield* seed(c.stored)
              const input = { generation: c.generation, claimedUntil: c.claimedUntil, nextAttemptAt: c.nextAttemptAt, reason: c.reason }
              const decision = decideDefer(row, input, c.now)
              const deferred = yield* repo.deferAttempt(identity, input, c.now)
              const after = Option.getOrUndefined(yield* repo.get(identity))
              expect(deferred).toBe(decision.outcome === "deferred")
              expect(after).toEqual(decision.next ?? row)
            }))),
          { numRuns: runs }
        )
      })
    }
  )
}
