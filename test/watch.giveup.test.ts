import { ConnectorStore } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { at, onFreshStore, seedWatches, storedWatch } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()
const id = identityOf()

/**
 * A give-up may end a generation, never hide a winner that moved during it:
 * an ingress coalesced into the generation while a verifier that had fetched
 * the older provider state held its last attempt.
 */
for (const adapter of adapters) {
  describe(`a give-up does not swallow a coalesced ingress on ${adapter.name}`, () => {
    // Pending, two attempts spent of three, opened against "w-old", due now.
    const pending = watchRow({
      verificationStatus: "pending_verification",
      verificationAttempts: 2,
      verifiedStateDigest: "w-verified",
      observedWinnerDigest: "w-old",
      nextAttemptAt: NOW,
      claimedUntil: null
    })
    const until = NOW + 30_000

    const coalescedThenGivenUp = (winners: Winners) =>
      Effect.gen(function*() {
        yield* seedWatches(pending)
        const store = yield* ConnectorStore
        expect(yield* store.claimWatchAttempt(id, { until, generation: 1, now: NOW })).toBe(true)
        // The winner moves while the verifier is out; the ingress joins the pending generation.
        winners.set("doc-1", "w-new")
        expect(yield* store.armWatch(id, "ingress", { dueAt: NOW + 10, triggeringWinner: "w-new" })).toBe("coalesced")
        // The verifier fetched the provider's older state, and this was its last attempt.
        expect(yield* store.recordVerification(id, {
          generation: 1,
          claimedUntil: until,
          fetchedDigest: "w-old",
          maxAttempts: 3,
          dueAt: NOW + 60_000
        })).toBe("repair_failed")
        return store
      })

    it.effect("the given-up watch keeps the winner it was opened against, so the audit branch lists it", () => {
      const winners = new Winners({ "doc-1": "w-old" })
      return onFreshStore(adapter, winners.single(), Effect.gen(function*() {
        yield* at(NOW)
        const store = yield* coalescedThenGivenUp(winners)
        expect(yield* storedWatch(id)).toMatchObject({
          verificationStatus: "repair_failed",
          verificationAttempts: 3,
          observedWinnerDigest: "w-old",
          verifiedStateDigest: "w-verified",
          nextAttemptAt: null,
          claimedUntil: null
        })
        const due = yield* store.listDueOperations(NOW)
        expect(due.watches.map((w) => w.sourceID)).toEqual([id.sourceID])
      }))
    })

    it.effect("the next ingress for the winner that coalesced opens a new generation against it", () => {
      const winners = new Winners({ "doc-1": "w-old" })
      return onFreshStore(adapter, winners.single(), Effect.gen(function*() {
        yield* at(NOW)
        const store = yield* coalescedThenGivenUp(winners)
        expect(yield* store.armWatch(id, "ingress", { dueAt: NOW + 20, triggeringWinner: "w-new" })).toBe("opened")
        expect(yield* storedWatch(id)).toMatchObject({
          verificationStatus: "pending_verification",
          repairGeneration: 2,
          verificationAttempts: 0,
          observedWinnerDigest: "w-new",
          nextAttemptAt: NOW + 20
        })
      }))
    })

    it.effect("the give-up stays bounded: given up against the winner it opened with, it is listed and re-opened no more", () => {
      const winners = new Winners({ "doc-1": "w-new" })
      return onFreshStore(adapter, winners.single(), Effect.gen(function*() {
        yield* at(NOW)
        const store = yield* coalescedThenGivenUp(winners)
        // The audit re-opens it once, against the winner that moved.
        expect(yield* store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" })).toBe("opened")
        for (let attempt = 0; attempt < 3; attempt++) {
          expect(yield* store.claimWatchAttempt(id, { until: NOW + 1_000 + attempt, generation: 2, now: NOW })).toBe(true)
          yield* store.recordVerification(id, {
            generation: 2,
            claimedUntil: NOW + 1_000 + attempt,
            fetchedDigest: "w-provider",
            maxAttempts: 3,
            dueAt: NOW
          })
        }
        expect(yield* storedWatch(id)).toMatchObject({ verificationStatus: "repair_failed", observedWinnerDigest: "w-new" })
        expect((yield* store.listDueOperations(NOW)).watches).toEqual([])
        expect(yield* store.armWatch(id, "ingress", { dueAt: NOW, triggeringWinner: "w-new" })).toBe("noop")
      }))
    })
  })
}
