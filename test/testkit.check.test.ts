import { checkRunnerLoop, RunnerLoopCheckFailed, type RunnerInvariant, type RunnerLoop } from "@connector-store/testkit"
import { describe, expect, it } from "vitest"
import { blindResendLoop, droppedTokenLoop, finalizeInTryLoop, readmeLoop } from "./testkit.loops.js"

/** The check's failure, or a test failure when it passed. */
const failureOf = async (loop: RunnerLoop): Promise<RunnerLoopCheckFailed> => {
  const error = await checkRunnerLoop(loop, { numRuns: 200, seed: 7 }).then(() => undefined, (e: unknown) => e)
  expect(error, "the check passed a broken loop").toBeInstanceOf(RunnerLoopCheckFailed)
  return error as RunnerLoopCheckFailed
}

describe("checkRunnerLoop", () => {
  it("passes the README's runner loop with its default options", async () => {
    const report = await checkRunnerLoop(readmeLoop)
    console.log(`checkRunnerLoop(readmeLoop) with default options: ${report.runs} runs in ${report.elapsedMs} ms`)
    expect(report.runs).toBeGreaterThan(0)
  }, 120_000)

  const broken: ReadonlyArray<readonly [string, RunnerLoop, RunnerInvariant, RegExp]> = [
    ["ignores the reissue and re-sends blind", blindResendLoop, "no-double-apply", /applied 2 times by requests that were not sanctioned reissues/],
    ["records a failure when finalize itself failed", finalizeInTryLoop, "no-failed-that-applied", /is dead and not in doubt, but the provider applied it/],
    ["drops the lease token", droppedTokenLoop, "nothing-stuck", /still attempted after recovery/]
  ]
  it.each(broken)("fails a loop that %s, with a replayable counterexample naming the problem", async (_, loop, invariant, detail) => {
    const failure = await failureOf(loop)
    expect(failure.invariants).toContain(invariant)
    expect(failure.message).toMatch(detail)
    expect(failure.message).toContain(`✗ ${invariant}`)
    expect(failure.message).toContain("the calls in order, with each answer:")
    expect(failure.message).toMatch(/replay it: checkRunnerLoop\(loop, \{ seed: -?\d+, path: "[\d:]*" \}\) \(the run before shrinking: path "\d+"\)/)
    // The printed seed and path replay the failing run (the shrunk steps are replayed against the scheduler's record of the run before).
    const replayed = await checkRunnerLoop(loop, { seed: failure.seed, path: failure.path.split(":")[0]! }).then(() => undefined, (e: unknown) => e)
    expect((replayed as RunnerLoopCheckFailed).invariants).toEqual(failure.invariants)
  }, 120_000)
})
