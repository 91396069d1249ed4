import {
  CHECK_SCOPE,
  type CheckedStore,
  checkRunnerLoop,
  CheckOptionInvalid,
  type CheckRunnerLoopOptions,
  type RunnerLoop,
  RunnerLoopCheckFailed,
  type VerifierLoop
} from "@connector-store/testkit"
import { describe, expect, it } from "vitest"
import { readmeLoop, watchDueIn } from "./testkit.loops.js"

/** The check's failure, or a test failure when it passed. */
const failureOf = async (loop: RunnerLoop, options: CheckRunnerLoopOptions = {}): Promise<RunnerLoopCheckFailed> => {
  const error = await checkRunnerLoop(loop, { numRuns: 100, seed: 7, ...options }).then(() => undefined, (e: unknown) => e)
  expect(error, "the check passed a broken loop").toBeInstanceOf(RunnerLoopCheckFailed)
  return error as RunnerLoopCheckFailed
}

/** The README's loop, but it throws on any edit that is not an update: a connector that only ever sends updates. */
const updateOnlyLoop: RunnerLoop = async (store, provider, edit) => {
  if (edit.op !== "update") throw new Error(`this connector never sends a ${edit.op}`)
  return readmeLoop(store, provider, edit)
}

describe("checkRunnerLoop's recovery moves the clock to what is due", () => {
  it("passes a correct loop whose watches are due in 30 s, and in 5 min", async () => {
    expect((await checkRunnerLoop(watchDueIn(30_000), { numRuns: 60, seed: 7 })).runs).toBe(60)
    expect((await checkRunnerLoop(watchDueIn(300_000), { numRuns: 60, seed: 8 })).runs).toBe(60)
  }, 120_000)

  it("fails a loop whose watches fall due past the horizon, saying when they are due; a longer horizon passes it", async () => {
    const twoHours = 2 * 3_600_000
    const failure = await failureOf(watchDueIn(twoHours))
    expect(failure.invariants).toEqual(["nothing-stuck"])
    expect(failure.message).toMatch(/watch \S+ g\d+ still pending after recovery, due at \d+ \(\d+ ms after recovery ended\)/)
    expect(failure.message).toMatch(/recovery stops: the next due time, \+\d+, is past its horizon \+3660000/)
    // The trace shows each watch's due time where the loop armed it.
    expect(failure.message).toMatch(new RegExp(`finalizeOperationAndArmWatch \\S+ → \\S+ \\S+ token \\S+, watch due \\+\\d+ \\(in ${twoHours} ms\\)`))
    expect((await checkRunnerLoop(watchDueIn(twoHours), { numRuns: 30, seed: 7, recoveryHorizonMs: 3 * 3_600_000 })).runs).toBe(30)
  }, 120_000)

  it("still fails a loop that never verifies: too few rounds to reach the due times leave the watch pending", async () => {
    const failure = await failureOf(watchDueIn(30_000), { recoveryRounds: 1, crashes: 0, storeFaults: false, fates: ["ok"] })
    expect(failure.invariants).toEqual(["nothing-stuck"])
    expect(failure.message).toMatch(/still pending after recovery, due at \d+ \(\d+ ms after recovery ended\)/)
  }, 120_000)
})

describe("checkRunnerLoop's edit kinds", () => {
  it("makes only the kinds asked for: an update-only connector passes with kinds [\"update\"]", async () => {
    expect((await checkRunnerLoop(updateOnlyLoop, { kinds: ["update"], numRuns: 60, seed: 7 })).runs).toBe(60)
  }, 120_000)

  it("makes every kind by default: the update-only connector fails on the create or delete it is handed", async () => {
    const failure = await failureOf(updateOnlyLoop)
    expect(failure.invariants).toContain("typed-rejections")
    expect(failure.message).toMatch(/this connector never sends a (create|delete)/)
  }, 120_000)

  it("with updates and deletes but no creates, never hands a create: an update of a deleted entity is not made", async () => {
    const noCreates: RunnerLoop = async (store, provider, edit) => {
      if (edit.op === "create") throw new Error("this connector never sends a create")
      return readmeLoop(store, provider, edit)
    }
    expect((await checkRunnerLoop(noCreates, { kinds: ["update", "delete"], numRuns: 100, seed: 7 })).runs).toBe(100)
  }, 120_000)

  it("makes deletes only under the intents asked for", async () => {
    const idempotentOnly: RunnerLoop = async (store, provider, edit) => {
      if (edit.op === "delete" && edit.reissueIntent.kind !== "idempotent-delete") throw new Error("this connector deletes idempotently only")
      return readmeLoop(store, provider, edit)
    }
    expect((await checkRunnerLoop(idempotentOnly, { deleteIntents: ["idempotent-delete"], numRuns: 60, seed: 7 })).runs).toBe(60)
    const failure = await failureOf(idempotentOnly)
    expect(failure.message).toMatch(/this connector deletes idempotently only/)
  }, 120_000)
})

describe("checkRunnerLoop's options it cannot run with", () => {
  const bad: ReadonlyArray<readonly [string, CheckRunnerLoopOptions, RegExp]> = [
    ["kinds", { kinds: [] }, /option kinds must be a non-empty array of "update", "create", "delete", got \[\]/],
    ["kinds", { kinds: ["update", "upsert" as never] }, /option kinds has "upsert", which is none of "update", "create", "delete"/],
    ["deleteIntents", { deleteIntents: ["soft" as never] }, /option deleteIntents has "soft", which is none of "idempotent-delete", "reconcile"/],
    ["recoveryHorizonMs", { recoveryHorizonMs: -1 }, /option recoveryHorizonMs must be a whole number from 0 to \d+, got -1/],
    ["recoveryHorizonMs", { recoveryHorizonMs: Number.NaN }, /option recoveryHorizonMs must be a whole number/],
    ["recoveryRounds", { recoveryRounds: 0 }, /option recoveryRounds must be a whole number from 1 to 1000, got 0/],
    ["recoveryRounds", { recoveryRounds: 2.5 }, /option recoveryRounds must be a whole number from 1 to 1000, got 2.5/]
  ]
  it.each(bad)("refuses a bad %s with CheckOptionInvalid naming it, running nothing", async (option, options, message) => {
    let ran = 0
    const counting: RunnerLoop = async (store, provider, edit) => {
      ran++
      return readmeLoop(store, provider, edit)
    }
    const error = await checkRunnerLoop(counting, { numRuns: 1, ...options }).then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(CheckOptionInvalid)
    expect((error as CheckOptionInvalid).option).toBe(option)
    expect((error as Error).message).toMatch(message)
    expect(ran).toBe(0)
  })
})

describe("checkRunnerLoop's verifier option", () => {
  /** A verifier pass as the runner loops page writes it, with `now` for the store's clock. */
  const verifierOn = (now: (store: CheckedStore) => number): VerifierLoop => async (store, provider, repair) => {
    const { watches } = await store.listDueOperations(now(store))
    for (const watch of watches) {
      const identity = { ...CHECK_SCOPE, sourceID: watch.sourceID }
      const until = now(store) + 30_000
      if (!(await store.claimWatchAttempt(identity, { generation: watch.repairGeneration, now: now(store), until }))) continue
      const entity = await provider.get(watch.sourceID)
      const outcome = await store.recordVerification(identity, {
        generation: watch.repairGeneration, claimedUntil: until, fetchedDigest: entity?.digest ?? null, maxAttempts: 5, dueAt: now(store)
      })
      if (outcome === "pending" && entity !== null) repair(watch.documentID, entity.digest)
    }
  }

  it("runs your verifier where it verifies due watches: one on the store's clock passes", async () => {
    let passes = 0
    const counted: VerifierLoop = async (store, provider, repair) => {
      passes++
      return verifierOn((s) => s.now())(store, provider, repair)
    }
    expect((await checkRunnerLoop(watchDueIn(30_000), { verifier: counted, numRuns: 30, seed: 7 })).runs).toBe(30)
    expect(passes).toBeGreaterThan(0)
  }, 120_000)

  it("fails a verifier on the machine's clock (Date.now()): its watches are left pending, due far past the horizon", async () => {
    const failure = await failureOf(watchDueIn(30_000), { verifier: verifierOn(() => Date.now()) })
    expect(failure.invariants).toContain("nothing-stuck")
    expect(failure.message).toMatch(/still pending after recovery, due at \d+ \(\d+ ms after recovery ended\)/)
  }, 120_000)

  it("fails a verifier that rejects with an error of its own, naming it", async () => {
    const failure = await failureOf(readmeLoop, { verifier: async () => { throw new Error("verifier bug") } })
    expect(failure.invariants).toContain("typed-rejections")
    expect(failure.message).toMatch(/verifier bug/)
  }, 120_000)

  it("refuses a verifier that is not a function", async () => {
    const error = await checkRunnerLoop(readmeLoop, { verifier: "verify" as never }).then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(CheckOptionInvalid)
    expect((error as CheckOptionInvalid).option).toBe("verifier")
  })
})
