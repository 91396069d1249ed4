import type { ProjectionWatch } from "@connector-store/core"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { claimInput, KEY, POLICY } from "./operations.fixtures.js"
import { identityOf, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { type CellStore, runnerCells } from "./support/runners.js"

/**
 * The hot transitions' observable behaviour, the same on every adapter ×
 * runner cell (memory and SQLite on the ports, the Effect API's direct path
 * and the Promise API's lane; Postgres on the ports and the lane): one short
 * script per transition, every answer and row written out as the
 * transition's table in docs/watch-state-machine.md and docs/operations.md
 * says it must be. Each cell proves every hot call ran on its own runner.
 */

const id = identityOf()
/** A watch on another document, which no call here may touch. */
const bystander = watchRow({ sourceID: "src-bystander", documentID: "doc-bystander", verificationStatus: "verified" })
/** A pending watch due a second ago, unclaimed: generation 1, one attempt spent, version 3. */
const due = watchRow({ nextAttemptAt: NOW - 1_000, claimedUntil: null })
/** A pending watch whose attempt a verifier holds until NOW + 30s. */
const claimed = watchRow({ nextAttemptAt: NOW - 1_000, claimedUntil: NOW + 30_000 })

/** The row a write of `changes` leaves, one version on, written at NOW. */
const written = (row: ProjectionWatch, changes: Partial<ProjectionWatch>): ProjectionWatch => ({
  ...row,
  ...changes,
  version: row.version + 1,
  updatedAt: NOW
})

const finalizeInput = (leaseToken: string) => ({
  leaseToken,
  sourceID: "src-1",
  documentID: "doc-1",
  providerEtag: "etag-1",
  resultEntity: { id: 1 },
  watchDueAt: NOW + 5_000
})

for (const cell of runnerCells) {
  describe(`hot transitions on ${cell.name}`, () => {
    let store: CellStore
    /** The store opened for the test, to close (none when opening failed). */
    let opened: CellStore | undefined
    /** The winners the document store holds (`w-` and the id when absent), and every read made. */
    let winners: Map<string, string>
    let reads: Array<string>

    beforeEach(async () => {
      winners = new Map()
      reads = []
      opened = undefined
      store = await cell.open({
        readWinner: (documentID: string) => {
          reads.push(documentID)
          return winners.get(documentID) ?? `w-${documentID}`
        }
      }, POLICY)
      opened = store
      await store.seedWatches(bystander)
    })

    afterEach(async () => {
      if (opened === undefined) return
      try {
        store.expectRanOnRunner()
        expect(await store.watch(bystander)).toEqual(bystander)
      } finally {
        await opened.close()
      }
    })

    /** Runs `call`, insisting that it changed no row, and answers what it answered. */
    const unchanged = async <A>(call: () => Promise<A>): Promise<A> => {
      const before = await store.snapshot()
      const answer = await call()
      expect(await store.snapshot()).toEqual(before)
      return answer
    }

    describe("armWatch", () => {
      it("arming an identity that has no row is a noop and writes nothing", async () => {
        expect(await unchanged(() => store.armWatch(identityOf({ sourceID: "nobody" }), "manual", { dueAt: NOW }))).toBe("noop")
      })

      it("a manual arm of an existing watch opens its next generation against the current winner", async () => {
        const verified = watchRow({ verificationStatus: "verified", nextAttemptAt: null })
        await store.seedWatches(verified)
        winners.set("doc-1", "w-now")
        expect(await store.armWatch(id, "manual", { dueAt: NOW + 2_000 })).toBe("opened")
        expect(await store.watch(id)).toEqual(written(verified, {
          repairGeneration: 2,
          verificationAttempts: 0,
          verificationStatus: "pending_verification",
          observedWinnerDigest: "w-now",
          nextAttemptAt: NOW + 2_000
        }))
      })

      it("an ingress arm for the current winner coalesces into a pending generation; for another winner it is a noop", async () => {
        const pending = watchRow({ nextAttemptAt: NOW + 60_000 })
        await store.seedWatches(pending)
        expect(await unchanged(() => store.armWatch(id, "ingress", { dueAt: NOW + 2_000, triggeringWinner: "w-elsewhere" }))).toBe("noop")
        expect(await store.armWatch(id, "ingress", { dueAt: NOW + 2_000, triggeringWinner: "w-doc-1" })).toBe("coalesced")
        expect(await store.watch(id)).toEqual(written(pending, { nextAttemptAt: NOW + 2_000 }))
      })
    })

    describe("claimWatchAttempt", () => {
      const claim = (now: number, generation = 1) => store.claimWatchAttempt(id, { until: now + 30_000, generation, now })

      it("a due watch is claimed until the caller's `until`", async () => {
        await store.seedWatches(due)
        expect(await claim(NOW)).toBe(true)
        expect(await store.watch(id)).toEqual(written(due, { claimedUntil: NOW + 30_000 }))
      })

      it("a watch not due yet by the caller's clock, or of another generation, is not claimed", async () => {
        await store.seedWatches(due)
        expect(await unchanged(() => claim(NOW - 2_000))).toBe(false)
        expect(await unchanged(() => claim(NOW, 2))).toBe(false)
      })

      it("a watch claimed by someone else is not claimed again until that claim lapses", async () => {
        await store.seedWatches(claimed)
        expect(await unchanged(() => claim(NOW))).toBe(false)
        expect(await claim(NOW + 30_000)).toBe(true)
        expect(await store.watch(id)).toEqual(written(claimed, { claimedUntil: NOW + 60_000 }))
      })
    })

    describe("deferWatch", () => {
      it("the claim's holder pushes its attempt out, with a reason, and gives the claim up", async () => {
        await store.seedWatches(claimed)
        expect(await store.deferWatch(id, { nextAttemptAt: NOW + 5_000, generation: 1, claimedUntil: NOW + 30_000, reason: "offline" })).toBe(true)
        expect(await store.watch(id)).toEqual(written(claimed, { nextAttemptAt: NOW + 5_000, claimedUntil: null, deferReason: "offline" }))
      })

      it("a stranger (another claim, or another generation) defers nothing", async () => {
        await store.seedWatches(claimed)
        expect(await unchanged(() => store.deferWatch(id, { nextAttemptAt: NOW + 5_000, generation: 1, claimedUntil: NOW + 29_999 }))).toBe(false)
        expect(await unchanged(() => store.deferWatch(id, { nextAttemptAt: NOW + 5_000, generation: 2, claimedUntil: NOW + 30_000 }))).toBe(false)
      })
    })

    describe("recordVerification", () => {
      const verification = { generation: 1, claimedUntil: NOW + 30_000, maxAttempts: 5, dueAt: NOW + 60_000 }

      it("a fetched state equal to the current winner verifies the watch and sets both watermarks to it", async () => {
        await store.seedWatches(claimed)
        winners.set("doc-1", "w-now")
        expect(await store.recordVerification(id, { ...verification, fetchedDigest: "w-now" })).toBe("verified")
        expect(await store.watch(id)).toEqual(written(claimed, {
          verificationStatus: "verified",
          verifiedStateDigest: "w-now",
          observedWinnerDigest: "w-now",
          nextAttemptAt: null,
          claimedUntil: null
        }))
      })

      it("a mismatch spends an attempt and schedules the next; the last attempt gives up; watermarks stay", async () => {
        await store.seedWatches(claimed)
        expect(await store.recordVerification(id, { ...verification, fetchedDigest: "w-provider" })).toBe("pending")
        const pending = written(claimed, { verificationAttempts: 2, nextAttemptAt: NOW + 60_000, claimedUntil: null })
        expect(await store.watch(id)).toEqual(pending)
        expect(await store.recordVerification(id, { ...verification, claimedUntil: null, fetchedDigest: null, maxAttempts: 3 })).toBe("repair_failed")
        expect(await store.watch(id)).toEqual(written(pending, {
          verificationStatus: "repair_failed",
          verificationAttempts: 3,
          nextAttemptAt: null
        }))
      })

      it("a verifier of another generation, or of a claim that is not the row's, is stale, reads no winner and writes nothing", async () => {
        await store.seedWatches(claimed)
        expect(await unchanged(() => store.recordVerification(id, { ...verification, generation: 2, fetchedDigest: "w-doc-1" }))).toBe("stale-generation")
        expect(await unchanged(() => store.recordVerification(id, { ...verification, claimedUntil: NOW + 1, fetchedDigest: "w-doc-1" }))).toBe("stale-claim")
        expect(await unchanged(() => store.recordVerification(identityOf({ sourceID: "nobody" }), { ...verification, fetchedDigest: "w" }))).toBe("stale-generation")
        expect(reads).toEqual([])
      })
    })

    describe("claimOperation", () => {
      it("a new key is claimed: attempted, no attempt spent, leased for the policy's lease", async () => {
        const claim = await store.claimOperation(claimInput())
        expect(claim).toMatchObject({ outcome: "claimed", created: true, reissue: null, lease: { expiresAt: NOW + 10_000 } })
        if (claim.outcome !== "claimed") return
        expect(claim.lease.token).toMatch(/\S/)
        expect(await store.operation(KEY)).toEqual(claim.operation)
        expect(claim.operation).toMatchObject({
          ...KEY,
          state: "attempted",
          attempts: 0,
          payloadHash: "hash-1",
          sendMarker: null,
          inDoubtSince: null,
          leaseToken: claim.lease.token,
          leaseExpiresAt: NOW + 10_000,
          nextAttemptAt: NOW + 10_000,
          createdAt: NOW,
          updatedAt: NOW
        })
      })

      it("the same key under a live lease is busy; with another payload it is an IdempotencyConflict; neither writes", async () => {
        const first = await store.claimOperation(claimInput())
        store.clock.now = NOW + 9_999
        expect(await unchanged(() => store.claimOperation(claimInput()))).toEqual({
          outcome: "busy",
          operation: first.operation,
          leaseExpiresAt: NOW + 10_000
        })
        const conflict = await unchanged(() => store.claimOperation(claimInput({ payloadHash: "hash-other" })).catch((error: unknown) => error))
        expect(conflict).toMatchObject({ _tag: "IdempotencyConflict", method: "claimOperation" })
      })

      it("a lapsed lease whose request was marked sent is taken over with the safe reissue intent, in doubt since the takeover", async () => {
        const first = await store.claimOperation(claimInput())
        if (first.outcome !== "claimed") throw new Error(first.outcome)
        expect(await store.markOperationSent(KEY, { leaseToken: first.lease.token })).toMatchObject({ outcome: "sent" })
        store.clock.now = NOW + 10_000
        const takeover = await store.claimOperation(claimInput())
        expect(takeover).toMatchObject({
          outcome: "claimed",
          created: false,
          reissue: { kind: "conditional-update", ifMatch: "etag-0" },
          lease: { expiresAt: NOW + 20_000 }
        })
        if (takeover.outcome !== "claimed") return
        expect(takeover.lease.token).not.toBe(first.lease.token)
        expect(await store.operation(KEY)).toMatchObject({
          state: "attempted",
          attempts: 1,
          sendMarker: null,
          inDoubtSince: NOW + 10_000,
          leaseToken: takeover.lease.token,
          leaseExpiresAt: NOW + 20_000,
          updatedAt: NOW + 10_000
        })
      })
    })

    describe("markOperationSent", () => {
      it("the holder marks its request sent (one attempt counted), once; a stranger is lease-lost and writes nothing", async () => {
        const claim = await store.claimOperation(claimInput())
        if (claim.outcome !== "claimed") throw new Error(claim.outcome)
        const lost = await unchanged(() => store.markOperationSent(KEY, { leaseToken: "a-stranger" }))
        expect(lost).toEqual({ outcome: "lease-lost", operation: claim.operation })
        const sent = await store.markOperationSent(KEY, { leaseToken: claim.lease.token })
        expect(sent).toEqual({
          outcome: "sent",
          operation: { ...claim.operation, attempts: 1, sendMarker: claim.lease.token, version: claim.operation.version + 1 }
        })
        expect(await store.operation(KEY)).toEqual(sent.operation)
        expect(await unchanged(() => store.markOperationSent(KEY, { leaseToken: claim.lease.token }))).toEqual({ outcome: "already-sent", operation: sent.operation })
        expect(await unchanged(() => store.markOperationSent({ ...KEY, operationID: "op-none" }, { leaseToken: claim.lease.token })))
          .toEqual({ outcome: "lease-lost", operation: null })
      })

      it("the holder of an operation out of attempts, not in doubt, is told exhausted: the operation is dead, its lease released", async () => {
        const spent = operationRow({
          state: "attempted",
          attempts: 3,
          leaseToken: "token-1",
          leaseExpiresAt: NOW + 5_000,
          nextAttemptAt: NOW + 5_000,
          incarnation: "incarnation-1"
        })
        await store.seedOperations(spent)
        const answer = await store.markOperationSent(KEY, { leaseToken: "token-1" })
        expect(answer).toMatchObject({ outcome: "exhausted", operation: { state: "dead", attempts: 3, lastKind: "exhausted", leaseToken: null, sendMarker: null } })
        expect(await store.operation(KEY)).toEqual(answer.operation)
      })
    })

    describe("finalizeOperationAndArmWatch", () => {
      it("the holder commits, opens the source's watch on the document against its current winner, and deletes the watches it supersedes", async () => {
        // The source's watch was on another document; the document was watched under another source.
        const existing = watchRow({ documentID: "doc-0", verificationStatus: "verified", nextAttemptAt: null })
        const superseded = watchRow({ sourceID: "src-old", verificationStatus: "verified", nextAttemptAt: null })
        await store.seedWatches(existing, superseded)
        const claim = await store.claimOperation(claimInput())
        if (claim.outcome !== "claimed") throw new Error(claim.outcome)
        winners.set("doc-1", "w-now")
        const result = await store.finalizeOperationAndArmWatch(KEY, finalizeInput(claim.lease.token))
        const armed = written(existing, {
          documentID: "doc-1",
          repairGeneration: 2,
          verificationAttempts: 0,
          verificationStatus: "pending_verification",
          observedWinnerDigest: "w-now",
          nextAttemptAt: NOW + 5_000
        })
        expect(result).toMatchObject({ outcome: "committed", watch: armed, superseded: [identityOf({ sourceID: "src-old" })] })
        if (result.outcome !== "committed") return
        expect(result.operation).toMatchObject({
          state: "committed",
          attempts: 1,
          sendMarker: claim.lease.token,
          inDoubtSince: null,
          leaseToken: null,
          leaseExpiresAt: null,
          nextAttemptAt: null,
          providerEtag: "etag-1",
          resultEntity: { id: 1 },
          updatedAt: NOW
        })
        expect(await store.operation(KEY)).toEqual(result.operation)
        expect(await store.watch(id)).toEqual(armed)
        expect(await store.watch(superseded)).toBeUndefined()
        const replay = await unchanged(() => store.finalizeOperationAndArmWatch(KEY, finalizeInput(claim.lease.token)))
        expect(replay).toEqual({ outcome: "already-committed", operation: result.operation })
      })

      it("with no watch for the source, the holder's commit creates one at generation 0", async () => {
        const claim = await store.claimOperation(claimInput())
        if (claim.outcome !== "claimed") throw new Error(claim.outcome)
        const result = await store.finalizeOperationAndArmWatch(KEY, finalizeInput(claim.lease.token))
        const created: ProjectionWatch = {
          ...id,
          documentID: "doc-1",
          verifiedStateDigest: null,
          observedWinnerDigest: "w-doc-1",
          verificationStatus: "pending_verification",
          verificationAttempts: 0,
          repairGeneration: 0,
          nextAttemptAt: NOW + 5_000,
          claimedUntil: null,
          deferReason: null,
          version: 0,
          createdAt: NOW,
          updatedAt: NOW
        }
        expect(result).toMatchObject({ outcome: "committed", watch: created, superseded: [] })
        expect(await store.watch(id)).toEqual(created)
      })

      it("a stale lease holder (the lease taken over, or never held) is lease-lost, reads no winner and writes nothing", async () => {
        await store.seedWatches(due)
        const first = await store.claimOperation(claimInput())
        if (first.outcome !== "claimed") throw new Error(first.outcome)
        store.clock.now = NOW + 10_000
        const second = await store.claimOperation(claimInput())
        expect(second.outcome).toBe("claimed")
        expect(await unchanged(() => store.finalizeOperationAndArmWatch(KEY, finalizeInput(first.lease.token))))
          .toMatchObject({ outcome: "lease-lost", operation: second.operation })
        expect(await unchanged(() => store.finalizeOperationAndArmWatch(KEY, finalizeInput("a-stranger"))))
          .toMatchObject({ outcome: "lease-lost" })
        expect(reads).toEqual([])
      })
    })

    it("refuses bad input to every hot method with InvalidInput naming the method and field, before any row is read, and writes nothing", async () => {
      await store.seedWatches(claimed)
      const claim = await store.claimOperation(claimInput())
      if (claim.outcome !== "claimed") throw new Error(claim.outcome)
      store.expectRanOnRunner()
      const loose = (value: unknown) => value as never
      const bad: ReadonlyArray<readonly [method: string, field: string, call: () => Promise<unknown>]> = [
        ["armWatch", "identity.ownerDID", () => store.armWatch({ ...id, ownerDID: "" }, "manual", { dueAt: NOW })],
        ["armWatch", "options.dueAt", () => store.armWatch(id, "manual", { dueAt: Number.NaN })],
        ["claimWatchAttempt", "options.generation", () => store.claimWatchAttempt(id, { until: NOW + 1, generation: -1, now: NOW })],
        ["deferWatch", "options.reason", () => store.deferWatch(id, loose({ nextAttemptAt: NOW, generation: 1, claimedUntil: NOW + 30_000, reason: "sleepy" }))],
        ["recordVerification", "input.maxAttempts", () =>
          store.recordVerification(id, { generation: 1, claimedUntil: NOW + 30_000, fetchedDigest: "w", maxAttempts: 0, dueAt: NOW })],
        ["claimOperation", "input.payloadHash", () => store.claimOperation(claimInput({ payloadHash: "" }))],
        ["markOperationSent", "options.leaseToken", () => store.markOperationSent(KEY, loose({ leaseToken: 1 }))],
        ["finalizeOperationAndArmWatch", "options.watchDueAt", () =>
          store.finalizeOperationAndArmWatch(KEY, { ...finalizeInput(claim.lease.token), watchDueAt: Number.NaN })]
      ]
      const before = await store.snapshot()
      for (const [method, field, call] of bad) {
        await expect(call(), `${method} ${field}`).rejects.toMatchObject({ _tag: "InvalidInput", method, field })
      }
      expect(await store.snapshot()).toEqual(before)
      expect(reads).toEqual([])
      store.expectNoRowCalls()
    })
  })
}
