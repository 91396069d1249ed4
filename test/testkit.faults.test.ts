import { ConnectorStore } from "@connector-store/core"
import { attemptFailure, claimInput, Crash, FaultController, faultyMemoryLayer, finalizeInput, openFaultyMemoryStore } from "@connector-store/testkit"
import { Cause, Effect, Exit, Option } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"

const edit = {
  callerDID: "did:example:laptop", operationID: "op-1", ownerDID: "did:example:alice", connectorName: "calendar", model: "Event",
  op: "update" as const, accountKey: "alice@example.com", target: "calendars/primary", sourceID: "evt-1", deterministicEventID: "local-1",
  payloadHash: "sha256:lunch", documentID: "doc-1", reissueIntent: { kind: "conditional-update" as const, ifMatch: "etag-0" }
}
const finalize = (leaseToken: string, at: number) =>
  ({ leaseToken, sourceID: "evt-1", documentID: "doc-1", providerEtag: "etag-1", resultEntity: {}, watchDueAt: at })

describe("the testkit's faults for the memory store", () => {
  it("fails the next write of a kind, loses a race, fails a winner read, crashes at a named point, on a clock the test moves", async () => {
    const store = openFaultyMemoryStore({ readWinner: async () => "digest-1", operationPolicy: { leaseMs: 1_000 } })
    const { faults } = store
    const claim = await store.claimOperation(edit)
    if (claim.outcome !== "claimed") throw new Error(claim.outcome)
    await store.markOperationSent(edit, { leaseToken: claim.lease.token })
    faults.failNextWrites("watch", 1, "insert")
    await expect(store.finalizeOperationAndArmWatch(edit, finalize(claim.lease.token, store.now()))).rejects.toMatchObject({ _tag: "PersistenceError" })
    expect((await store.getOperation(edit))?.state).toBe("attempted") // rolled back whole
    faults.failNextWinnerReads()
    await expect(store.finalizeOperationAndArmWatch(edit, finalize(claim.lease.token, store.now()))).rejects.toMatchObject({ _tag: "WinnerReadFailed" })
    faults.loseNextRaces("operation")
    faults.crashAt("after:finalizeOperationAndArmWatch")
    await expect(store.finalizeOperationAndArmWatch(edit, finalize(claim.lease.token, store.now()))).rejects.toBeInstanceOf(Crash)
    expect((await store.getOperation(edit))?.state).toBe("committed") // it landed; its answer was lost
    expect(faults.injected).toEqual({ failedWrites: 1, lostRaces: 1, failedWinnerReads: 1, crashes: 1 })
    const at = store.now()
    faults.clock.advance(-5_000)
    expect(store.now()).toBe(at - 5_000)
    await store.close()
  })

  it("gives the Effect API the same faults through a layer", async () => {
    const faults = new FaultController(1_000)
    faults.failNextWrites("operation", 1, "insert")
    const program = Effect.gen(function*() {
      const store = yield* ConnectorStore
      const failed = yield* Effect.flip(store.claimOperation(edit))
      const claimed = yield* store.claimOperation(edit)
      return [failed._tag, claimed.outcome, claimed.operation.createdAt]
    })
    const layer = faultyMemoryLayer(faults, { readWinner: () => Effect.succeed("digest-1") })
    expect(await Effect.runPromise(program.pipe(Effect.provide(layer)))).toEqual(["PersistenceError", "claimed", 1_000])
  })

  it("gives the Effect API the same named crash points: before a call it is never made, after it its answer is lost", async () => {
    const faults = new FaultController(1_000)
    const crashOf = <A, E>(exit: Exit.Exit<A, E>) => Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    const program = Effect.gen(function*() {
      const store = yield* ConnectorStore
      faults.crashAt("before:claimOperation")
      const before = yield* Effect.exit(store.claimOperation(edit))
      const unclaimed = yield* store.getOperation(edit)
      const claim = yield* store.claimOperation(edit)
      if (claim.outcome !== "claimed") throw new Error(claim.outcome)
      yield* store.markOperationSent(edit, { leaseToken: claim.lease.token })
      faults.crashAt("after:finalizeOperationAndArmWatch")
      const after = yield* Effect.exit(store.finalizeOperationAndArmWatch(edit, finalize(claim.lease.token, 2_000)))
      const landed = yield* store.getOperation(edit)
      const again = yield* store.finalizeOperationAndArmWatch(edit, finalize(claim.lease.token, 2_000)) // used up: the next call goes through
      return { before, unclaimed, after, landed, again }
    })
    const layer = faultyMemoryLayer(faults, { readWinner: () => Effect.succeed("digest-1") })
    const { before, unclaimed, after, landed, again } = await Effect.runPromise(program.pipe(Effect.provide(layer)))
    expect(Exit.isFailure(before) && Cause.isDie(before.cause)).toBe(true) // a defect, never a typed failure
    expect(crashOf(before)).toMatchObject({ name: "Crash", at: "before:claimOperation" })
    expect(crashOf(before)).toBeInstanceOf(Crash)
    expect(Option.isNone(unclaimed)).toBe(true) // never made
    expect(crashOf(after)).toMatchObject({ name: "Crash", at: "after:finalizeOperationAndArmWatch" })
    expect(Option.getOrThrow(landed).state).toBe("committed") // it landed; its answer was lost
    expect(again.outcome).toBe("already-committed")
    expect(faults.injected.crashes).toBe(2)
  })

  it("generates inputs every call takes: no rejection is untyped", async () => {
    await fc.assert(fc.asyncProperty(claimInput(), fc.integer({ min: 0, max: 3 }), async (input, choice) => {
      const store = openFaultyMemoryStore({ readWinner: async () => "digest-1" })
      try {
        const claim = await store.claimOperation(input)
        if (claim.outcome !== "claimed") return
        await store.markOperationSent(input, { leaseToken: claim.lease.token })
        const now = store.now()
        const step = choice % 2 === 0
          ? fc.sample(finalizeInput(claim.lease.token, now), 1)[0]!
          : fc.sample(attemptFailure(claim.lease.token, now), 1)[0]!
        const answer = await ("watchDueAt" in step
          ? store.finalizeOperationAndArmWatch(input, step)
          : store.recordAttemptFailure(input, step)).catch((e: unknown) => e)
        expect(typeof (answer as { outcome?: unknown; _tag?: unknown }).outcome === "string" || typeof (answer as { _tag?: unknown })._tag === "string").toBe(true)
      } finally {
        await store.close()
      }
    }), { numRuns: 60 })
  })
})
