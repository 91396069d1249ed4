import {
  type ConnectorOperation,
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
import { propertyRuns } from "./support/runs.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/**
 * claimWatchAttempt and deferWatch are one guarded write each
 * (`WatchRepository.claimAttempt` / `deferAttempt`), not a read, the pure
 * decision and a versioned write. These properties are what lets the guard
 * stand in for the decision: on every adapter, for any stored row and any
 * input, the guarded write changes the row exactly when the contract's
 * rule (docs/watch-state-machine.md, written out below as `claimed` /
 * `deferred`, not taken from the code under test) allows it, and then
 * leaves exactly the row the rule gives; otherwise it answers false and
 * leaves the row as it was.
 *
 * markOperationSent's common case is one guarded write as well
 * (`OperationRepository.markSent`): it must write exactly when the lease
 * holder may count a new attempt (`sent` below), and then exactly that row;
 * every other branch is decided from a read, so there it must write nothing.
 *
 * Times are drawn from a few ticks around one instant, so every boundary
 * (due exactly now, a claim expiring exactly now, equal claims) is hit often.
 */
const adapters = await adaptersUnderTest()

/** Every write bumps the version and stamps the time it was made at. */
const written = <R extends { readonly version: number; readonly updatedAt: number }>(row: R, at: number, patch: Partial<R>): R => ({
  ...row,
  ...patch,
  version: row.version + 1,
  updatedAt: at
})

/**
 * The contract's claim: a pending row of the same generation, due (next set
 * and ≤ now), with no live claim (none, or one that ended at or before now),
 * gets claimedUntil := until. The row after the claim, or undefined when refused.
 */
const claimed = (
  row: ProjectionWatch | undefined,
  input: { readonly generation: number; readonly until: number },
  now: number,
  writtenAt: number
): ProjectionWatch | undefined =>
  row !== undefined && row.verificationStatus === "pending_verification" && row.repairGeneration === input.generation &&
    row.nextAttemptAt !== null && row.nextAttemptAt <= now && (row.claimedUntil === null || row.claimedUntil <= now)
    ? written(row, writtenAt, { claimedUntil: input.until })
    : undefined

/**
 * The contract's deferral: only the holder of the claim (the row's
 * claimedUntil is the caller's) of a pending row of that generation; next :=
 * nextAttemptAt, deferReason := reason (none: null), claim cleared.
 */
const deferred = (
  row: ProjectionWatch | undefined,
  input: { readonly generation: number; readonly claimedUntil: number; readonly nextAttemptAt: number; readonly reason?: DeferReason | null | undefined },
  now: number
): ProjectionWatch | undefined =>
  row !== undefined && row.verificationStatus === "pending_verification" && row.repairGeneration === input.generation &&
    row.claimedUntil === input.claimedUntil
    ? written(row, now, { nextAttemptAt: input.nextAttemptAt, deferReason: input.reason ?? null, claimedUntil: null })
    : undefined

/**
 * The contract's mark sent, where it writes: the lease holder (an attempted
 * row whose lease token is the caller's) that has not marked this run yet
 * (the marker is not its token) and has an attempt left records its token as
 * the marker and counts the attempt; an earlier run's marker becomes
 * durable doubt dated now, unless doubt is already dated. Undefined for
 * every other case (already sent, exhausted, not the holder), which the
 * guarded write must leave alone.
 */
const sent = (row: ConnectorOperation | undefined, token: string, maxAttempts: number, now: number): ConnectorOperation | undefined =>
  row !== undefined && row.state === "attempted" && row.leaseToken === token && row.sendMarker !== token &&
    row.attempts < maxAttempts
    ? written(row, now, {
      sendMarker: token,
      attempts: row.attempts + 1,
      inDoubtSince: row.inDoubtSince ?? (row.sendMarker !== null ? now : null)
    })
    : undefined

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
  const runs = propertyRuns(500)
  describe.runIf(adapter.name !== "postgres" || pgAvailable)(
    `guarded writes agree with the contract on ${adapter.name}`,
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

      it("claimAttempt writes exactly the contract's claim", async () => {
        await fc.assert(
          fc.asyncProperty(claimCase, (c) =>
            runtime.runPromise(Effect.gen(function*() {
              const repo = yield* WatchRepository
              const { row, identity } = yield* seed(c.stored)
              const input = { generation: c.generation, until: c.until }
              const expected = claimed(row, input, c.now, c.writtenAt)
              const answer = yield* repo.claimAttempt(identity, input, c.now, c.writtenAt)
              const after = Option.getOrUndefined(yield* repo.get(identity))
              expect(answer).toBe(expected !== undefined)
              expect(after).toEqual(expected ?? row)
            }))),
          { numRuns: runs }
        )
      })

      it("markSent writes exactly when the holder may count a new attempt, and exactly that row", async () => {
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
              const expected = sent(row, c.token, c.maxAttempts, c.now)
              const answer = Option.getOrUndefined(yield* repo.markSent(key, c.token, c.maxAttempts, c.now))
              const after = Option.getOrUndefined(yield* repo.get(key))
              expect(answer).toEqual(expected)
              expect(after).toEqual(expected ?? row)
            }))),
          { numRuns: runs }
        )
      })

      it("deferAttempt writes exactly the contract's deferral", async () => {
        await fc.assert(
          fc.asyncProperty(deferCase, (c) =>
            runtime.runPromise(Effect.gen(function*() {
              const repo = yield* WatchRepository
              const { row, identity } = yield* seed(c.stored)
              const input = { generation: c.generation, claimedUntil: c.claimedUntil, nextAttemptAt: c.nextAttemptAt, reason: c.reason }
              const expected = deferred(row, input, c.now)
              const answer = yield* repo.deferAttempt(identity, input, c.now)
              const after = Option.getOrUndefined(yield* repo.get(identity))
              expect(answer).toBe(expected !== undefined)
              expect(after).toEqual(expected ?? row)
            }))),
          { numRuns: runs }
        )
      })
    }
  )
}
