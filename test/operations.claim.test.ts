import { ConnectorStore, IdempotencyConflict } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  attemptedRow,
  claimed,
  claimedAndSent,
  claimInput,
  KEY,
  NOW,
  onOperationStore,
  POLICY
} from "./operations.fixtures.js"
import { at, failsChangingNothing, seedOperations, storedOperation, succeedsChangingNothing } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) => onOperationStore(adapter, {}, body)

  describe(`claimOperation on ${adapter.name}`, () => {
    it.effect("a new key inserts the operation attempted, with no attempt spent, leased to the claimer", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed()
        expect(claim.created).toBe(true)
        expect(claim.reissue).toBeNull()
        expect(claim.lease.expiresAt).toBe(NOW + POLICY.leaseMs)
        const row = yield* storedOperation(KEY)
        expect(row).toEqual(claim.operation)
        expect(row).toMatchObject({
          state: "attempted",
          attempts: 0,
          sendMarker: null,
          deferReason: null,
          leaseToken: claim.lease.token,
          leaseExpiresAt: NOW + POLICY.leaseMs,
          // Due again exactly when the lease lapses: a crashed runner's
          // operation is found by the due sweep without a lease check.
          nextAttemptAt: NOW + POLICY.leaseMs,
          version: 0,
          createdAt: NOW,
          updatedAt: NOW,
          reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" }
        })
        expect(row?.nodeKey).toMatch(/.{16,}/)
        expect(row?.incarnation).toMatch(/.{16,}/)
        expect(new Set([row?.nodeKey, row?.incarnation, row?.leaseToken]).size).toBe(3)
      })))

    it.effect("two new keys get different node keys and lease tokens", () =>
      onStore(Effect.gen(function*() {
        const a = yield* claimed()
        const b = yield* claimed(claimInput({ operationID: "op-2" }))
        expect(a.operation.nodeKey).not.toBe(b.operation.nodeKey)
        expect(a.lease.token).not.toBe(b.lease.token)
      })))

    it.effect("a claim may name its own lease length", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed(claimInput({ leaseMs: 2_500 }))
        expect(claim.lease.expiresAt).toBe(NOW + 2_500)
      })))

    it.effect("a replay while another runner's lease is live is busy and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const first = yield* claimed()
        yield* at(NOW + POLICY.leaseMs - 1)
        const store = yield* ConnectorStore
        const replay = yield* succeedsChangingNothing(store.claimOperation(claimInput()))
        expect(replay).toEqual({ outcome: "busy", operation: first.operation, leaseExpiresAt: first.lease.expiresAt })
      })))

    it.effect("a replay once the lease lapsed takes over the same row with a new token", () =>
      onStore(Effect.gen(function*() {
        const first = yield* claimed()
        yield* at(NOW + POLICY.leaseMs)
        const second = yield* claimed()
        expect(second.created).toBe(false)
        expect(second.reissue).toBeNull()
        expect(second.lease.token).not.toBe(first.lease.token)
        expect(second.operation).toEqual({
          ...first.operation,
          leaseToken: second.lease.token,
          leaseExpiresAt: NOW + 2 * POLICY.leaseMs,
          nextAttemptAt: NOW + 2 * POLICY.leaseMs,
          version: 1,
          updatedAt: NOW + POLICY.leaseMs
        })
        expect(yield* storedOperation(KEY)).toEqual(second.operation)
      })))

    it.effect("a replay with another payload hash is an IdempotencyConflict naming the key and writes nothing", () =>
      onStore(Effect.gen(function*() {
        yield* claimed()
        const store = yield* ConnectorStore
        for (const now of [NOW, NOW + POLICY.leaseMs]) {
          yield* at(now)
          const error = yield* failsChangingNothing(store.claimOperation(claimInput({ payloadHash: "hash-2" })))
          expect(error).toBeInstanceOf(IdempotencyConflict)
          expect(error).toMatchObject({ _tag: "IdempotencyConflict", callerDID: KEY.callerDID, operationID: KEY.operationID })
        }
      })))

    it.effect("a replay with another payload is a conflict on a finished operation too", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ state: "committed", nextAttemptAt: null }))
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.claimOperation(claimInput({ payloadHash: "other" })))
        expect(error).toMatchObject({ _tag: "IdempotencyConflict" })
      })))

    for (const state of ["committed", "dead", "reconcile_only"] as const) {
      it.effect(`a replay of a ${state} operation is finished with the stored row and changes nothing`, () =>
        onStore(Effect.gen(function*() {
          const row = attemptedRow({ state, nextAttemptAt: null, resultEntity: { id: "evt-9" }, providerEtag: "etag-9" })
          yield* seedOperations(row)
          const store = yield* ConnectorStore
          expect(yield* succeedsChangingNothing(store.claimOperation(claimInput()))).toEqual({ outcome: "finished", operation: row })
        })))
    }

    it.effect("a replay of an operation backing off is scheduled and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const row = attemptedRow({ nextAttemptAt: NOW + 5_000, lastKind: "retryable" })
        yield* seedOperations(row)
        const store = yield* ConnectorStore
        expect(yield* succeedsChangingNothing(store.claimOperation(claimInput())))
          .toEqual({ outcome: "scheduled", operation: row, nextAttemptAt: NOW + 5_000 })
      })))

    it.effect("a deferred operation whose time came is claimed and its deferral cleared", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ nextAttemptAt: NOW, deferReason: "offline" }))
        const claim = yield* claimed()
        expect(claim.operation.deferReason).toBeNull()
        expect(claim.operation.attempts).toBe(1)
      })))

    it.effect("replay after a crash between send marker and outcome: a safe intent is handed back and the marker cleared", () =>
      onStore(Effect.gen(function*() {
        const crashed = yield* claimedAndSent()
        yield* at(NOW + POLICY.leaseMs)
        const claim = yield* claimed()
        expect(claim.reissue).toEqual({ kind: "conditional-update", ifMatch: "etag-0" })
        expect(claim.lease.token).not.toBe(crashed)
        // The crashed run's marker is folded into the durable doubt, dated by the takeover.
        expect(claim.operation).toMatchObject({ sendMarker: null, inDoubtSince: NOW + POLICY.leaseMs, attempts: 1, state: "attempted" })
      })))

    it.effect("replay after such a crash with a deterministic create id hands the id back", () =>
      onStore(Effect.gen(function*() {
        const input = claimInput({ op: "create", sourceID: null, reissueIntent: { kind: "deterministic-create", providerID: "evt-1" } })
        yield* claimedAndSent(input)
        yield* at(NOW + POLICY.leaseMs)
        const claim = yield* claimed(input)
        expect(claim.reissue).toEqual({ kind: "deterministic-create", providerID: "evt-1" })
      })))

    it.effect("replay after such a crash with no safe way to re-send makes the operation reconcile_only, keeping the marker", () =>
      onStore(Effect.gen(function*() {
        const input = claimInput({ reissueIntent: { kind: "reconcile" } })
        const crashed = yield* claimedAndSent(input)
        yield* at(NOW + POLICY.leaseMs)
        const store = yield* ConnectorStore
        const result = yield* store.claimOperation(input)
        expect(result.outcome).toBe("finished")
        expect(result.operation).toMatchObject({
          state: "reconcile_only",
          sendMarker: crashed,
          leaseToken: null,
          leaseExpiresAt: null,
          nextAttemptAt: null,
          attempts: 1
        })
        expect(yield* storedOperation(KEY)).toEqual(result.operation)
      })))

    it.effect("a stored intent this store does not know never allows a re-send (fails closed)", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ sendMarker: "old-run", reissueIntent: { kind: "conditional" } }))
        const store = yield* ConnectorStore
        const result = yield* store.claimOperation(claimInput())
        expect(result).toMatchObject({ outcome: "finished", operation: { state: "reconcile_only", sendMarker: "old-run" } })
      })))

    it.effect("an operation out of attempts is never leased again: dead, or reconcile_only when its last request is in doubt", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(
          attemptedRow({ attempts: POLICY.maxAttempts }),
          attemptedRow({ operationID: "op-2", nodeKey: "node-2", attempts: POLICY.maxAttempts, sendMarker: "last-run" })
        )
        const store = yield* ConnectorStore
        expect(yield* store.claimOperation(claimInput())).toMatchObject({ outcome: "finished", operation: { state: "dead" } })
        expect(yield* store.claimOperation(claimInput({ operationID: "op-2" })))
          .toMatchObject({ outcome: "finished", operation: { state: "reconcile_only", sendMarker: "last-run", attempts: 3 } })
      })))
  })

  describe(`claimOperation with markSent on ${adapter.name}`, () => {
    it.effect("a new key is inserted leased and marked sent in one write: the attempt counted, the lease's token the marker", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed(claimInput({ markSent: true }))
        expect(claim.created).toBe(true)
        expect(claim.operation).toMatchObject({
          state: "attempted",
          attempts: 1,
          sendMarker: claim.lease.token,
          inDoubtSince: null,
          leaseToken: claim.lease.token,
          nextAttemptAt: NOW + POLICY.leaseMs,
          version: 0
        })
        expect(yield* storedOperation(KEY)).toEqual(claim.operation)
        // The runner's own mark after it is a replay that changes nothing.
        const store = yield* ConnectorStore
        expect(yield* succeedsChangingNothing(store.markOperationSent(KEY, { leaseToken: claim.lease.token })))
          .toMatchObject({ outcome: "already-sent", operation: { attempts: 1 } })
      })))

    it.effect("a takeover is marked sent in the same one-version write, and a runner that dies before sending leaves the operation in doubt", () =>
      onStore(Effect.gen(function*() {
        const first = yield* claimed(claimInput({ markSent: true }))
        yield* at(NOW + POLICY.leaseMs)
        const second = yield* claimed(claimInput({ markSent: true }))
        // The first run may have sent: its marker is folded into the doubt, and the second gets the safe re-send.
        expect(second.reissue).toEqual({ kind: "conditional-update", ifMatch: "etag-0" })
        expect(second.operation).toMatchObject({
          attempts: 2,
          sendMarker: second.lease.token,
          inDoubtSince: NOW + POLICY.leaseMs,
          version: first.operation.version + 1
        })
        expect(yield* storedOperation(KEY)).toEqual(second.operation)
        yield* at(NOW + 2 * POLICY.leaseMs)
        const third = yield* claimed()
        expect(third.reissue).toEqual({ kind: "conditional-update", ifMatch: "etag-0" })
        expect(third.operation).toMatchObject({ attempts: 2, sendMarker: null, inDoubtSince: NOW + POLICY.leaseMs })
      })))

    it.effect("with no safe way to re-send, a runner that died after a claim marked sent leaves the operation reconcile_only", () =>
      onStore(Effect.gen(function*() {
        const input = claimInput({ reissueIntent: { kind: "reconcile" }, markSent: true })
        const first = yield* claimed(input)
        yield* at(NOW + POLICY.leaseMs)
        const store = yield* ConnectorStore
        expect(yield* store.claimOperation(input))
          .toMatchObject({ outcome: "finished", operation: { state: "reconcile_only", sendMarker: first.lease.token, attempts: 1 } })
      })))

    it.effect("a claim that does not lease marks nothing: busy, scheduled and finished change nothing", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(
          attemptedRow({ nextAttemptAt: NOW + 5_000, lastKind: "retryable" }),
          attemptedRow({ operationID: "op-2", nodeKey: "node-2", state: "committed", nextAttemptAt: null }),
          attemptedRow({ operationID: "op-3", nodeKey: "node-3", leaseToken: "held", leaseExpiresAt: NOW + 1, nextAttemptAt: NOW + 1 })
        )
        const store = yield* ConnectorStore
        for (const [operationID, outcome] of [["op-1", "scheduled"], ["op-2", "finished"], ["op-3", "busy"]] as const) {
          const result = yield* succeedsChangingNothing(store.claimOperation(claimInput({ operationID, markSent: true })))
          expect(result.outcome).toBe(outcome)
          expect(result.operation).toMatchObject({ sendMarker: null })
        }
      })))

    it.effect("out of attempts, a claim with markSent ends the operation as a plain claim does", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ attempts: POLICY.maxAttempts }))
        const store = yield* ConnectorStore
        expect(yield* store.claimOperation(claimInput({ markSent: true })))
          .toMatchObject({ outcome: "finished", operation: { state: "dead", attempts: POLICY.maxAttempts, sendMarker: null } })
      })))

    it.effect("markSent that is not a boolean is refused, naming the field, with nothing written", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const error = yield* failsChangingNothing(store.claimOperation(claimInput({ markSent: "yes" as never })))
        expect(error).toMatchObject({ _tag: "InvalidInput", method: "claimOperation", field: "input.markSent" })
      })))
  })

  describe(`leases on ${adapter.name}`, () => {
    it.effect("the holder renews its lease, moving the expiry and the due time", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed()
        yield* at(NOW + 4_000)
        const store = yield* ConnectorStore
        const renewed = yield* store.renewOperationLease(KEY, { leaseToken: claim.lease.token, leaseMs: 20_000 })
        expect(renewed).toMatchObject({ outcome: "renewed", lease: { token: claim.lease.token, expiresAt: NOW + 24_000 } })
        expect(yield* storedOperation(KEY)).toMatchObject({ leaseExpiresAt: NOW + 24_000, nextAttemptAt: NOW + 24_000, version: 1 })
      })))

    it.effect("a runner whose lease lapsed but was not taken over may still renew it (the token fences, not the clock)", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed()
        yield* at(NOW + POLICY.leaseMs + 5_000)
        const store = yield* ConnectorStore
        expect(yield* store.renewOperationLease(KEY, { leaseToken: claim.lease.token }))
          .toMatchObject({ outcome: "renewed", lease: { expiresAt: NOW + 2 * POLICY.leaseMs + 5_000 } })
      })))

    it.effect("a stale runner (lease lapsed and taken over) cannot renew, mark sent or record a failure: lease-lost, nothing changes", () =>
      onStore(Effect.gen(function*() {
        const stale = yield* claimed()
        yield* at(NOW + POLICY.leaseMs)
        const current = yield* claimed()
        const store = yield* ConnectorStore
        const token = stale.lease.token
        const lost = { outcome: "lease-lost", operation: current.operation }
        expect(yield* succeedsChangingNothing(store.renewOperationLease(KEY, { leaseToken: token }))).toEqual(lost)
        expect(yield* succeedsChangingNothing(store.markOperationSent(KEY, { leaseToken: token }))).toEqual(lost)
        for (const kind of ["retryable", "permanent", "unknown", "offline", "auth"] as const) {
          expect(yield* succeedsChangingNothing(store.recordAttemptFailure(KEY, { leaseToken: token, kind }))).toEqual(lost)
        }
      })))

    it.effect("runner writes on an unknown key are lease-lost with no operation", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        expect(yield* succeedsChangingNothing(store.markOperationSent(KEY, { leaseToken: "t" })))
          .toEqual({ outcome: "lease-lost", operation: null })
      })))
  })

  describe(`markOperationSent on ${adapter.name}`, () => {
    it.effect("counts the attempt and records the run's marker before the request leaves; a repeat changes nothing", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed()
        const store = yield* ConnectorStore
        const sent = yield* store.markOperationSent(KEY, { leaseToken: claim.lease.token })
        expect(sent).toMatchObject({ outcome: "sent", operation: { attempts: 1, sendMarker: claim.lease.token, version: 1 } })
        expect(yield* succeedsChangingNothing(store.markOperationSent(KEY, { leaseToken: claim.lease.token })))
          .toMatchObject({ outcome: "already-sent", operation: { attempts: 1 } })
      })))

    it.effect("with no attempt left the request must not leave: exhausted, the operation dead and its lease released", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ attempts: 3, leaseToken: "tok", leaseExpiresAt: NOW + 1, nextAttemptAt: NOW + 1 }))
        const store = yield* ConnectorStore
        expect(yield* store.markOperationSent(KEY, { leaseToken: "tok" }))
          .toMatchObject({ outcome: "exhausted", operation: { state: "dead", attempts: 3, leaseToken: null, nextAttemptAt: null } })
      })))
  })

  describe(`recordAttemptFailure on ${adapter.name}`, () => {
    it.effect("retryable: stays attempted, due after the exponential backoff with jitter, lease released, kind and status kept", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const result = yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "retryable", httpStatus: 503 })
        expect(result).toMatchObject({
          outcome: "retrying",
          operation: {
            state: "attempted",
            attempts: 1,
            sendMarker: null,
            leaseToken: null,
            leaseExpiresAt: null,
            lastKind: "retryable",
            lastHTTPStatus: 503
          }
        })
        // Equal jitter after one spent attempt: in [base/2, base].
        const next = result.operation!.nextAttemptAt!
        expect(next).toBeGreaterThanOrEqual(NOW + POLICY.backoff.baseDelayMs / 2)
        expect(next).toBeLessThanOrEqual(NOW + POLICY.backoff.baseDelayMs)
      })))

    it.effect("retryable: the backoff ceiling doubles per spent attempt", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ attempts: 1, leaseToken: "tok", leaseExpiresAt: NOW + 1, nextAttemptAt: NOW + 1 }))
        const store = yield* ConnectorStore
        yield* store.markOperationSent(KEY, { leaseToken: "tok" })
        const result = yield* store.recordAttemptFailure(KEY, { leaseToken: "tok", kind: "retryable" })
        const next = result.operation!.nextAttemptAt!
        expect(next).toBeGreaterThanOrEqual(NOW + POLICY.backoff.baseDelayMs)
        expect(next).toBeLessThanOrEqual(NOW + 2 * POLICY.backoff.baseDelayMs)
      })))

    it.effect("retryable: a provider's Retry-After later than the backoff wins", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const result = yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "retryable", httpStatus: 429, retryAt: NOW + 90_000 })
        expect(result.operation?.nextAttemptAt).toBe(NOW + 90_000)
      })))

    it.effect("retryable with no attempt left and an answer proving it did not apply: dead", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ attempts: 2, leaseToken: "tok", leaseExpiresAt: NOW + 1, nextAttemptAt: NOW + 1 }))
        const store = yield* ConnectorStore
        yield* store.markOperationSent(KEY, { leaseToken: "tok" })
        expect(yield* store.recordAttemptFailure(KEY, { leaseToken: "tok", kind: "retryable", httpStatus: 429 }))
          .toMatchObject({
            outcome: "dead",
            operation: { state: "dead", attempts: 3, nextAttemptAt: null, lastHTTPStatus: 429, sendMarker: null, inDoubtSince: null }
          })
      })))

    it.effect("retryable with no attempt left and a 5xx: reconcile_only, since the request may have landed", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ attempts: 2, leaseToken: "tok", leaseExpiresAt: NOW + 1, nextAttemptAt: NOW + 1 }))
        const store = yield* ConnectorStore
        yield* store.markOperationSent(KEY, { leaseToken: "tok" })
        expect(yield* store.recordAttemptFailure(KEY, { leaseToken: "tok", kind: "retryable", httpStatus: 500 }))
          .toMatchObject({
            outcome: "reconcile_only",
            operation: { state: "reconcile_only", attempts: 3, nextAttemptAt: null, lastHTTPStatus: 500, sendMarker: "tok", inDoubtSince: NOW }
          })
      })))

    it.effect("a failure reported without a send marker still spends the attempt", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed()
        const store = yield* ConnectorStore
        expect(yield* store.recordAttemptFailure(KEY, { leaseToken: claim.lease.token, kind: "retryable" }))
          .toMatchObject({ outcome: "retrying", operation: { attempts: 1 } })
      })))

    it.effect("permanent: dead, lease released", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        expect(yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "permanent", httpStatus: 422 }))
          .toMatchObject({
            outcome: "dead",
            operation: { state: "dead", attempts: 1, leaseToken: null, nextAttemptAt: null, lastKind: "permanent", lastHTTPStatus: 422 }
          })
      })))

    it.effect("unknown outcome with a safe reissue intent: in doubt and backing off; the re-drive gets the reissue", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const failed = yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "unknown", httpStatus: 503 })
        expect(failed).toMatchObject({
          outcome: "retrying",
          operation: { state: "attempted", attempts: 1, inDoubtSince: NOW, sendMarker: null, leaseToken: null, lastKind: "unknown", lastHTTPStatus: 503 }
        })
        const next = failed.outcome === "retrying" ? failed.operation.nextAttemptAt! : 0
        expect(next).toBeGreaterThan(NOW)
        expect(yield* store.claimOperation(claimInput())).toMatchObject({ outcome: "scheduled", nextAttemptAt: next })
        yield* at(next)
        expect(yield* store.claimOperation(claimInput())).toMatchObject({
          outcome: "claimed",
          created: false,
          reissue: { kind: "conditional-update", ifMatch: "etag-0" }
        })
      })))

    it.effect("unknown outcome with no safe reissue intent: reconcile_only, the run kept as the marker of the request in doubt", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const claimed = yield* store.claimOperation(claimInput({ reissueIntent: { kind: "reconcile" }, markSent: true }))
        if (claimed.outcome !== "claimed") throw new Error(claimed.outcome)
        const token = claimed.lease.token
        expect(yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "unknown" }))
          .toMatchObject({ outcome: "reconcile_only", operation: { state: "reconcile_only", sendMarker: token, leaseToken: null } })
        expect(yield* store.claimOperation(claimInput({ reissueIntent: { kind: "reconcile" } }))).toMatchObject({ outcome: "finished" })
      })))

    it.effect("unknown outcome on the last attempt, even with a safe reissue intent: reconcile_only", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ attempts: POLICY.maxAttempts - 1, inDoubtSince: NOW - 5_000, nextAttemptAt: NOW }))
        const store = yield* ConnectorStore
        const claimed = yield* store.claimOperation(claimInput({ markSent: true }))
        if (claimed.outcome !== "claimed") throw new Error(claimed.outcome)
        expect(yield* store.recordAttemptFailure(KEY, { leaseToken: claimed.lease.token, kind: "unknown" }))
          .toMatchObject({ outcome: "reconcile_only", operation: { state: "reconcile_only", attempts: POLICY.maxAttempts, inDoubtSince: NOW - 5_000 } })
      })))

    for (const kind of ["offline", "auth"] as const) {
      it.effect(`${kind}: deferred for that reason without spending an attempt`, () =>
        onStore(Effect.gen(function*() {
          const token = yield* claimedAndSent()
          const store = yield* ConnectorStore
          expect(yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind }))
            .toMatchObject({
              outcome: "deferred",
              operation: { state: "attempted", attempts: 0, deferReason: kind, sendMarker: null, leaseToken: null, nextAttemptAt: NOW + POLICY.deferMs }
            })
          expect(yield* store.claimOperation(claimInput())).toMatchObject({ outcome: "scheduled" })
        })))
    }

    it.effect("offline deferral with a fallback time, then resumeOfflineDeferred makes it due and claimable", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "offline", retryAt: NOW + 5_000 })
        expect((yield* storedOperation(KEY))?.nextAttemptAt).toBe(NOW + 5_000)
        yield* at(NOW + 100)
        yield* store.resumeOfflineDeferred(NOW + 100)
        expect(yield* storedOperation(KEY)).toMatchObject({ nextAttemptAt: NOW + 100, deferReason: null })
        const claim = yield* claimed()
        expect(claim.reissue).toBeNull()
      })))

    it.effect("auth deferral is resumed by resumeAuthDeferred for its owner and connector only", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        yield* store.recordAttemptFailure(KEY, { leaseToken: token, kind: "auth", httpStatus: 401 })
        yield* store.resumeAuthDeferred({ ownerDID: "did:owner:2", connectorNames: ["gcal"], now: NOW })
        yield* store.resumeAuthDeferred({ ownerDID: "did:owner:1", connectorNames: ["jira"], now: NOW })
        expect((yield* storedOperation(KEY))?.deferReason).toBe("auth")
        yield* store.resumeAuthDeferred({ ownerDID: "did:owner:1", connectorNames: ["gcal"], now: NOW })
        expect(yield* storedOperation(KEY)).toMatchObject({ deferReason: null, nextAttemptAt: NOW, lastHTTPStatus: 401 })
      })))
  })
}
