import { type AttemptFailure, ConnectorStore } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { attemptedRow, claimed, claimedAndSent, claimInput, KEY, NOW, onOperationStore, POLICY } from "./operations.fixtures.js"
import { at, seedOperations, storedOperation, succeedsChangingNothing } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** When runner A's lease lapses: A sent its request (it may have landed) and died. */
const A_LAPSED = NOW + 10_000
/** When runner B's lease lapses, had B died too. */
const B_LAPSED = A_LAPSED + 10_000
/** Later than any backoff of the policy: every retrying operation is due again. */
const AFTER_BACKOFF = A_LAPSED + 8_000
const CONDITIONAL = { kind: "conditional-update", ifMatch: "etag-0" } as const
const FINALIZE = { sourceID: "src-1", documentID: "doc-1", resultEntity: { id: "src-1" }, watchDueAt: NOW + 60_000 }

/** How runner B, which took over A's in-doubt operation, ends without settling anything. */
type BEnds = readonly [label: string, end: (token: string) => Effect.Effect<number, unknown, StoreServices>]

const failure = (token: string, f: Omit<AttemptFailure, "leaseToken">) =>
  Effect.flatMap(ConnectorStore, (store) => store.recordAttemptFailure(KEY, { leaseToken: token, ...f }))

const markSent = (token: string) => Effect.flatMap(ConnectorStore, (store) => store.markOperationSent(KEY, { leaseToken: token }))

/** Each way B can end; each returns when runner C may claim. */
const B_ENDS: ReadonlyArray<BEnds> = [
  ["B goes offline before sending", (token) =>
    Effect.as(failure(token, { kind: "offline", retryAt: A_LAPSED }), A_LAPSED)],
  ["B's grant lapsed before sending", (token) =>
    Effect.as(failure(token, { kind: "auth", retryAt: A_LAPSED }), A_LAPSED)],
  ["B dies before markOperationSent", () => Effect.succeed(B_LAPSED)],
  ["B dies after markOperationSent", (token) => Effect.as(markSent(token), B_LAPSED)],
  ["B's conditional re-send fails with a retryable 503", (token) =>
    Effect.zipRight(markSent(token), Effect.as(failure(token, { kind: "retryable", httpStatus: 503 }), AFTER_BACKOFF))],
  ["B's conditional re-send is refused with a 412 (A's request may be why)", (token) =>
    Effect.zipRight(markSent(token), Effect.as(failure(token, { kind: "retryable", httpStatus: 412 }), AFTER_BACKOFF))]
]

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>, policy = POLICY) =>
    onOperationStore(adapter, new Winners({ "doc-1": "w-1" }).single(), body, policy)

  /** A claims, marks sent, its request leaves, A dies; B takes over at A's lapse and is handed the reissue. */
  const aSentAndDiedThenBTookOver = Effect.gen(function*() {
    yield* claimedAndSent()
    yield* at(A_LAPSED)
    const b = yield* claimed()
    expect(b.reissue).toEqual(CONDITIONAL)
    return b.lease.token
  })

  describe(`the in-doubt fact survives every takeover on ${adapter.name}`, () => {
    for (const [label, end] of B_ENDS) {
      it.effect(`${label}: runner C is still handed the reissue, never a blind send`, () =>
        onStore(Effect.gen(function*() {
          const bToken = yield* aSentAndDiedThenBTookOver
          yield* at(yield* end(bToken))
          const c = yield* claimed()
          expect(c.reissue).toEqual(CONDITIONAL)
          expect(c.operation).toMatchObject({ state: "attempted", sendMarker: null, inDoubtSince: A_LAPSED })
          // And D after C dies before sending: the doubt still stands, dated by the first takeover.
          yield* at(c.lease.expiresAt)
          const d = yield* claimed()
          expect(d.reissue).toEqual(CONDITIONAL)
          expect(d.operation.inDoubtSince).toBe(A_LAPSED)
        })))
    }

    it.effect("with no safe intent, the takeover after B makes it reconcile_only instead of a blind send", () =>
      onStore(Effect.gen(function*() {
        const input = claimInput({ reissueIntent: { kind: "reconcile" } })
        yield* claimedAndSent(input)
        yield* at(A_LAPSED)
        const store = yield* ConnectorStore
        const b = yield* store.claimOperation(input)
        expect(b).toMatchObject({ outcome: "finished", operation: { state: "reconcile_only", inDoubtSince: A_LAPSED } })
        expect(yield* store.getDocumentWriteStates(["doc-1"])).toEqual(new Map([["doc-1", "unconfirmed"]]))
      })))

    it.effect("B's 503 on its last attempt: reconcile_only, and the document reads unconfirmed", () =>
      onStore(Effect.gen(function*() {
        const bToken = yield* aSentAndDiedThenBTookOver
        yield* markSent(bToken)
        const result = yield* failure(bToken, { kind: "retryable", httpStatus: 503 })
        expect(result).toMatchObject({ outcome: "reconcile_only", operation: { attempts: 2, inDoubtSince: A_LAPSED, sendMarker: bToken } })
        const store = yield* ConnectorStore
        expect(yield* store.getDocumentWriteStates(["doc-1"])).toEqual(new Map([["doc-1", "unconfirmed"]]))
      }), { ...POLICY, maxAttempts: 2 }))

    it.effect("B's 412 on its last attempt: still reconcile_only (a later answer never settles an earlier request)", () =>
      onStore(Effect.gen(function*() {
        const bToken = yield* aSentAndDiedThenBTookOver
        yield* markSent(bToken)
        expect(yield* failure(bToken, { kind: "retryable", httpStatus: 412 })).toMatchObject({ outcome: "reconcile_only" })
      }), { ...POLICY, maxAttempts: 2 }))

    it.effect("a permanent refusal of B's re-send: dead, but the document reads unconfirmed, never failed", () =>
      onStore(Effect.gen(function*() {
        const bToken = yield* aSentAndDiedThenBTookOver
        yield* markSent(bToken)
        expect(yield* failure(bToken, { kind: "permanent", httpStatus: 412 }))
          .toMatchObject({ outcome: "dead", operation: { state: "dead", inDoubtSince: A_LAPSED } })
        const store = yield* ConnectorStore
        expect(yield* store.getDocumentWriteStates(["doc-1"])).toEqual(new Map([["doc-1", "unconfirmed"]]))
      })))

    it.effect("B dies before sending on the last attempt: the next claim makes it reconcile_only, not dead", () =>
      onStore(Effect.gen(function*() {
        yield* claimedAndSent()
        yield* at(A_LAPSED)
        const store = yield* ConnectorStore
        expect(yield* store.claimOperation(claimInput()))
          .toMatchObject({ outcome: "finished", operation: { state: "reconcile_only", inDoubtSince: A_LAPSED } })
        expect(yield* store.getDocumentWriteStates(["doc-1"])).toEqual(new Map([["doc-1", "unconfirmed"]]))
      }), { ...POLICY, maxAttempts: 1 }))

    it.effect("mark sent with no attempt left while in doubt (a lower limit since the claim): exhausted, reconcile_only", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({
          attempts: POLICY.maxAttempts,
          inDoubtSince: NOW - 5_000,
          leaseToken: "tok",
          leaseExpiresAt: NOW + 1,
          nextAttemptAt: NOW + 1
        }))
        expect(yield* markSent("tok")).toMatchObject({
          outcome: "exhausted",
          operation: { state: "reconcile_only", inDoubtSince: NOW - 5_000, leaseToken: null, lastKind: "exhausted" }
        })
      })))

    it.effect("a commit settles the doubt: committed, inDoubtSince cleared, the document committed", () =>
      onStore(Effect.gen(function*() {
        const bToken = yield* aSentAndDiedThenBTookOver
        const store = yield* ConnectorStore
        const done = yield* store.finalizeOperationAndArmWatch(KEY, { leaseToken: bToken, ...FINALIZE })
        expect(done).toMatchObject({ outcome: "committed", operation: { state: "committed", inDoubtSince: null, sendMarker: bToken } })
        expect(yield* store.getDocumentWriteStates(["doc-1"])).toEqual(new Map([["doc-1", "committed"]]))
      })))

    it.effect("the run in doubt settles its own reconcile_only by finalizing; the doubt goes with it", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent(claimInput({ reissueIntent: { kind: "reconcile" } }))
        expect(yield* failure(token, { kind: "unknown" }))
          .toMatchObject({ outcome: "reconcile_only", operation: { inDoubtSince: NOW, sendMarker: token } })
        const store = yield* ConnectorStore
        expect(yield* store.finalizeOperationAndArmWatch(KEY, { leaseToken: token, ...FINALIZE }))
          .toMatchObject({ outcome: "committed", operation: { inDoubtSince: null } })
      })))
  })

  describe(`which answers add doubt on ${adapter.name}`, () => {
    const firstAttemptFails = (f: Omit<AttemptFailure, "leaseToken">) =>
      Effect.gen(function*() {
        const token = yield* claimedAndSent()
        yield* failure(token, f)
        yield* at(NOW + POLICY.backoff.maxDelayMs)
        return yield* claimed()
      })

    const cases: ReadonlyArray<readonly [string, Omit<AttemptFailure, "leaseToken">, boolean]> = [
      ["a 429 proves the request did not apply: no doubt", { kind: "retryable", httpStatus: 429 }, false],
      ["a 503 does not: in doubt", { kind: "retryable", httpStatus: 503 }, true],
      ["no status does not: in doubt (fail-closed)", { kind: "retryable" }, true],
      ["notApplied: true proves it whatever the status", { kind: "retryable", httpStatus: 503, notApplied: true }, false],
      ["notApplied: false overrides a 4xx", { kind: "retryable", httpStatus: 409, notApplied: false }, true]
    ]
    for (const [label, f, inDoubt] of cases) {
      it.effect(label, () =>
        onStore(Effect.gen(function*() {
          const next = yield* firstAttemptFails(f)
          expect(next.reissue).toEqual(inDoubt ? CONDITIONAL : null)
          expect(next.operation.inDoubtSince).toBe(inDoubt ? NOW : null)
        })))
    }

    it.effect("offline after marking gives the attempt back and adds no doubt: the next claim sends plainly", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        yield* failure(token, { kind: "offline", retryAt: NOW })
        const next = yield* claimed()
        expect(next.reissue).toBeNull()
        expect(next.operation).toMatchObject({ attempts: 0, inDoubtSince: null })
      })))
  })

  describe(`a same-holder retry after a lost acknowledgement on ${adapter.name}`, () => {
    it.effect("markOperationSent again is already-sent with the stored row, and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        const again = yield* succeedsChangingNothing(store.markOperationSent(KEY, { leaseToken: token }))
        expect(again).toEqual({ outcome: "already-sent", operation: yield* storedOperation(KEY) })
        expect(again.operation).toMatchObject({ attempts: 1, sendMarker: token })
      })))

    it.effect("finalize again after the commit is already-committed with the stored result, and changes nothing", () =>
      onStore(Effect.gen(function*() {
        const bToken = yield* aSentAndDiedThenBTookOver
        const store = yield* ConnectorStore
        const first = yield* store.finalizeOperationAndArmWatch(KEY, { leaseToken: bToken, ...FINALIZE })
        expect(first.outcome).toBe("committed")
        const again = yield* succeedsChangingNothing(store.finalizeOperationAndArmWatch(KEY, { leaseToken: bToken, ...FINALIZE }))
        expect(again).toEqual({ outcome: "already-committed", operation: first.operation })
        expect(again.operation).toMatchObject({ resultEntity: { id: "src-1" }, inDoubtSince: null })
      })))
  })
}
