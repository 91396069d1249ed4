import {
  checkRunnerLoop,
  type CheckRunnerLoopOptions,
  RunnerLoopCheckFailed,
  type RunnerInvariant,
  type RunnerLoop,
  schedulerOf
} from "@connector-store/testkit"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { blindResendLoop, droppedTokenLoop, finalizeInTryLoop, goneAlwaysLoop, goneAsFailureLoop, ignoresLeaseLostLoop, readmeLoop, watchDueIn, wrongSourceDeleteLoop } from "./testkit.loops.js"

/** The check's failure, or a test failure when it passed. */
const failureOf = async (loop: RunnerLoop, options: CheckRunnerLoopOptions = {}): Promise<RunnerLoopCheckFailed> => {
  const error = await checkRunnerLoop(loop, { numRuns: 200, seed: 7, ...options }).then(() => undefined, (e: unknown) => e)
  expect(error, "the check passed a broken loop").toBeInstanceOf(RunnerLoopCheckFailed)
  return error as RunnerLoopCheckFailed
}

/** The report below its first two lines (how many runs and shrinks, the replay line): the counterexample itself. */
const counterexample = (failure: RunnerLoopCheckFailed) => failure.report.split("\n").slice(2).join("\n")

/** The order in which `s` releases five tasks scheduled at once. */
const releaseOrder = async (s: fc.Scheduler): Promise<string> => {
  const out: Array<string> = []
  for (const label of ["a", "b", "c", "d", "e"]) void s.schedule(Promise.resolve(label), label).then((v) => out.push(v))
  await s.waitAll()
  return out.join("")
}

describe("checkRunnerLoop", () => {
  it("gives every run a scheduler whose order is its seed's alone (clones of one drawn scheduler share their random source)", async () => {
    expect(await releaseOrder(schedulerOf(1))).toBe(await releaseOrder(schedulerOf(1)))
    const [drawn] = fc.sample(fc.scheduler(), { seed: 1, numRuns: 1 }) as [fc.Scheduler & Record<symbol, () => fc.Scheduler>]
    const clones = [await releaseOrder(drawn[fc.cloneMethod]!()), await releaseOrder(drawn[fc.cloneMethod]!()), await releaseOrder(drawn[fc.cloneMethod]!())]
    expect(new Set(clones).size, "fast-check's clones now replay one order: the per-run scheduler may no longer be needed").toBeGreaterThan(1)
  })

  it("passes the README's runner loop with its default options", async () => {
    const report = await checkRunnerLoop(readmeLoop)
    console.log(`checkRunnerLoop(readmeLoop) with default options: ${report.runs} runs in ${report.elapsedMs} ms`)
    expect(report.runs).toBeGreaterThan(0)
  }, 120_000)

  it("passes the README's runner loop with its claims marking their requests sent (no markOperationSent call)", async () => {
    expect((await checkRunnerLoop(watchDueIn(300, true), { numRuns: 100, seed: 7 })).runs).toBe(100)
  }, 120_000)

  /** A provider that answers 404 and 410 for other reasons too (a wrong path, a wrong account): what `reconcile` deletes are for. */
  const misleading404: CheckRunnerLoopOptions = { fates: ["ok", "404", "410", "503"] }

  it("passes the README's runner loop under a provider whose 404 and 410 may mean another thing", async () => {
    expect((await checkRunnerLoop(readmeLoop, { ...misleading404, numRuns: 100, seed: 7 })).runs).toBe(100)
  }, 120_000)

  const broken: ReadonlyArray<readonly [string, RunnerLoop, RunnerInvariant, RegExp, CheckRunnerLoopOptions]> = [
    ["ignores the reissue and re-sends blind", blindResendLoop, "no-double-apply", /applied 2 times by requests that were not sanctioned reissues/, {}],
    ["records a failure when finalize itself failed", finalizeInTryLoop, "no-failed-that-applied", /is dead and not in doubt, but the provider applied it/, {}],
    [
      "calls the store under a lease token of its own making",
      droppedTokenLoop,
      "lease-token-from-claim",
      /runner\d called markOperationSent on \S+ with lease token lease-of-\S+, but its claim handed it lease-\d+ \(answered lease-lost\)/,
      {}
    ],
    [
      "sends although markOperationSent answered that its lease is gone",
      ignoresLeaseLostLoop,
      "sent-under-lease",
      /\w+ sent (an update|a create|a delete)\b.* \(request #\d+\) for \S+ although its markOperationSent answered (lease-lost|exhausted)/,
      {}
    ],
    [
      "takes a 404 or 410 of a reconcile delete as the entity gone",
      goneAlwaysLoop,
      "delete-removed",
      /is a committed delete of \S+, but the provider still has \S+: it was finalized without being applied/,
      misleading404
    ],
    [
      "finalizes a delete naming another entity",
      wrongSourceDeleteLoop,
      "delete-removed",
      /is a committed delete of D\d-s\d+, but its watch \(g\d+, D\d\) is still there/,
      {}
    ],
    [
      "records a 404 or 410 of an idempotent delete as a failure",
      goneAsFailureLoop,
      "no-failed-that-applied",
      /is dead and not in doubt, but the provider deleted its entity or answered it gone/,
      {}
    ]
  ]
  it.each(broken)("fails a loop that %s, with a counterexample naming the problem that its printed replay reproduces", async (_, loop, invariant, detail, options) => {
    const failure = await failureOf(loop, options)
    expect(failure.invariants).toContain(invariant)
    expect(failure.message).toMatch(detail)
    expect(failure.message).toContain(`✗ ${invariant}`)
    expect(failure.message).toContain("the calls in order, with each answer:")
    const replay = failure.message.match(/replay it: checkRunnerLoop\(loop, \{ seed: (-?\d+), path: "([\d:]*)" \}\)/)
    expect(replay, "the report prints how to replay it").not.toBeNull()
    expect([Number(replay![1]), replay![2]]).toEqual([failure.seed, failure.path])
    // The printed seed and full path replay the shrunk run itself: the same violations, plan and calls, line for line.
    const replayed = await failureOf(loop, { ...options, seed: failure.seed, path: failure.path })
    expect(replayed.invariants).toEqual(failure.invariants)
    expect(counterexample(replayed)).toEqual(counterexample(failure))
  }, 120_000)
})
