import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { adaptersUnderTest } from "../support/stores.js"
import { expectAgreement } from "./operations/agreement.js"
import { ModelStore } from "./operations/ModelStore.js"
import { emptyModel, KEYS, LATEST, type SendFate, type SourceName } from "./operations/OperationModel.js"
import { Claim, type Evidence, Fail, Finalize, MarkSent, Renew, Send } from "./operations/runnerCommands.js"
import { Advance, Crash, ResumeAuth, ResumeOffline, Retention, Sweep, WriteStates } from "./operations/storeCommands.js"
import { MODEL_RUNS, propertyRuns } from "../support/runs.js"

const adapters = await adaptersUnderTest()


/** A failure's seed and path replay with `CONNECTOR_STORE_MODEL_SEED` / `CONNECTOR_STORE_MODEL_PATH` (fast-check prints both). */
const parameters = <T>(): fc.Parameters<T> => {
  const seed = process.env["CONNECTOR_STORE_MODEL_SEED"]
  const path = process.env["CONNECTOR_STORE_MODEL_PATH"]
  return { numRuns: propertyRuns(200), ...(seed === undefined ? {} : { seed: Number(seed) }), ...(path === undefined ? {} : { path }) }
}

/** `times` copies of a command arbitrary: how `fc.commands` weighs one command over another. */
const weighted = <T>(times: number, arbitrary: fc.Arbitrary<T>): ReadonlyArray<fc.Arbitrary<T>> => Array(times).fill(arbitrary)

// Mostly one key, so long lifecycles of it (takeover after takeover) happen often; the others meet it on documents and watches.
const key = fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, { arbitrary: fc.nat({ max: KEYS.length - 1 }), weight: 3 })
// Mostly the newest runner (the one that may hold the lease), sometimes an older, stale one.
const runner = fc.oneof({ arbitrary: fc.constant(LATEST), weight: 3 }, { arbitrary: fc.nat({ max: 3 }), weight: 1 })

/**
 * Random lifecycles over three keys and a few runners each: claims (now and
 * then with another payload, or marking the request sent as they lease),
 * send markers, provider requests (answered,
 * answer lost, lost, rate-limited) to the testkit's fake provider,
 * every failure kind with and without proof that the request did not apply
 * (only what the runner could honestly know), finalizes under sources that
 * share a document, heartbeats, time passing across lease and backoff
 * boundaries, crashes at any step (a lease lapsing), resumes, sweeps,
 * retention and write-state reads. Besides agreeing with the model, no claim
 * after a possibly-landed request answers `reissue: null` and the
 * provider's own check finds no write applied twice.
 */
const commands = fc.commands([
  ...weighted(4, fc.tuple(key, fc.constantFrom("h1", "h1", "h1", "h1", "h2"), fc.boolean()).map(([k, h, sent]) => new Claim(k, h, sent))),
  ...weighted(3, fc.tuple(key, runner).map(([k, r]) => new MarkSent(k, r))),
  ...weighted(3, fc.tuple(key, runner, fc.constantFrom<SendFate>("answered", "answer-lost", "answer-lost", "lost", "rate-limited"))
    .map(([k, r, fate]) => new Send(k, r, fate))),
  ...weighted(3, fc.tuple(key, runner, fc.constantFrom("retryable", "retryable", "permanent", "unknown", "offline", "auth") as fc.Arbitrary<"retryable">,
    fc.option(fc.constantFrom(0, 300, 2_000), { nil: undefined }), fc.constantFrom<Evidence>("none", "none", "4xx", "flag", "4xx-not-proof"))
    .map(([k, r, kind, retryIn, evidence]) => new Fail(k, r, kind, retryIn, evidence))),
  ...weighted(2, fc.tuple(key, runner, fc.constantFrom<SourceName>("s1", "s2", "s3")).map(([k, r, s]) => new Finalize(k, r, s))),
  fc.tuple(key, runner).map(([k, r]) => new Renew(k, r)),
  ...weighted(2, fc.constantFrom(0, 1, 99, 400, 999, 1_000, 1_001, 3_000, 6_000, 20_000).map((ms) => new Advance(ms))),
  ...weighted(3, key.map((k) => new Crash(k))),
  fc.constant(new ResumeOffline()),
  fc.tuple(fc.constantFrom("did:owner:1", "did:owner:2"), fc.subarray(["gcal", "jira"])).map(([o, c]) => new ResumeAuth(o, c)),
  fc.constant(new Sweep()),
  fc.tuple(fc.constantFrom(-30_000, -1_000, 0, 1), fc.constantFrom(1, 2, 10)).map(([b, l]) => new Retention(b, l)),
  fc.constant(new WriteStates())
], { maxCommands: 60, size: "medium" })

describe("write-back operations agree with a plain model after every command", () => {
  it("CONNECTOR_STORE_MODEL_RUNS is a positive whole number of runs per adapter", () => {
    expect(Number.isSafeInteger(MODEL_RUNS) && MODEL_RUNS > 0, `runs: ${MODEL_RUNS}`).toBe(true)
  })

  for (const adapter of adapters) {
    it(`${adapter.name}: random claim/mark-sent/outcome/finalize/resume/sweep/retention/crash sequences`, async () => {
      const real = new ModelStore(adapter)
      try {
        await fc.assert(
          fc.asyncProperty(commands, async (cmds) => {
            await real.fresh()
            const model = emptyModel()
            await expectAgreement(model, real)
            await fc.asyncModelRun(() => ({ model, real }), cmds)
          }),
          parameters()
        )
      } finally {
        await real.dispose()
      }
    }, 600_000)
  }
})
