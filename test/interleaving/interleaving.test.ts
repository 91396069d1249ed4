import type { InvariantName } from "@connector-store/testkit"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { formatReport, runSchedule } from "./harness.js"
import { configArbitrary, type ConfigOptions, interleavingRuns, KNOWN_VIOLATIONS_AWAITING_FIX, replayParameters, type KnownViolation, type Profile } from "./profiles.js"
import { propertyRuns } from "../support/runs.js"

const PROFILES: ReadonlyArray<Profile> = ["write-back", "watches", "relist", "everything", "limits"]
/** Schedules per memory configuration (a third of it, at least one, on SQLite). */
const RUNS = interleavingRuns(40)
/** A longer run (more schedules than the CI default) gets the time it needs: about 1.5 s per schedule on a loaded machine. */
const TIMEOUT_MS = Math.max(60_000, RUNS * 1_500)

/** The property: a schedule of `options` breaks no invariant (of those `judged`, all by default); a failure throws the readable report. */
const property = (options: ConfigOptions, judged: ReadonlyArray<InvariantName> | undefined = undefined) =>
  fc.asyncProperty(fc.scheduler(), configArbitrary(options), async (s, config) => {
    // A schedule runs on microtasks alone: let the worker answer vitest's messages between schedules, or a long run's
    // replies wait until its end and vitest reports them timed out.
    await new Promise((resolve) => setImmediate(resolve))
    const result = await runSchedule(s, config)
    const violations = result.violations.filter((v) => judged?.includes(v.invariant) ?? true)
    if (violations.length > 0) throw new Error(formatReport(config, { ...result, violations }))
  })

/** The invariant names a failed check reports. */
const brokenIn = <T>(details: fc.RunDetails<T>): ReadonlyArray<string> => {
  const text = String((details.errorInstance as Error | undefined)?.message ?? "")
  return [...text.matchAll(/✗ ([a-z-]+) \(/g)].map((m) => m[1]!)
}

describe.each(["memory", "sqlite"] as const)("interleavings on %s", (adapter) => {
  it.each(PROFILES)("%s: every invariant holds in every schedule", async (profile) => {
    await fc.assert(property({ adapter, profile }), {
      numRuns: adapter === "sqlite" ? Math.max(1, Math.ceil(RUNS / 3)) : RUNS,
      ...replayParameters()
    })
  }, TIMEOUT_MS)
})

/**
 * A seeded schedule that shows each known violation on today's code, with
 * the invariant that must fire. When one of these fails because the
 * schedule no longer breaks anything, the defect is fixed: remove its entry
 * from `KNOWN_VIOLATIONS_AWAITING_FIX` (and this replay with it).
 */
const REPLAYS: Record<KnownViolation, { readonly profile: Profile; readonly seed: number; readonly path: string; readonly invariant: InvariantName }> = {
  "relist-deletes-a-live-document": { profile: "relist", seed: -178186562, path: "15:19:0", invariant: "relist-deletes-only-dead-documents" },
  "give-up-swallows-a-later-winner": { profile: "watches", seed: 2105668364, path: "471", invariant: "no-give-up-swallows-a-later-winner" }
}

// Only while some are listed: an empty list leaves no replay to run.
if (KNOWN_VIOLATIONS_AWAITING_FIX.length > 0) describe("known violations awaiting their fix (remove an entry once its fix is merged)", () => {
  it.each(KNOWN_VIOLATIONS_AWAITING_FIX)("%s is still found when its scoping is lifted", async (known) => {
    const replay = REPLAYS[known]
    const details = await fc.check(property({ adapter: "memory", profile: replay.profile, known: [] }), {
      seed: replay.seed,
      path: replay.path,
      endOnFailure: true
    })
    expect(details.failed, `${known}: the seeded schedule breaks nothing any more; if the fix is merged, remove the entry`).toBe(true)
    expect(brokenIn(details)).toContain(replay.invariant)
  })
})

describe("the suite catches a broken runner", () => {
  it("a runner that ignores the claim's reissue and re-sends blind applies a write twice", async () => {
    const details = await fc.check(property({ adapter: "memory", profile: "write-back", ignoresReissue: true }), {
      numRuns: propertyRuns(200, { min: 200 }),
      seed: 21,
      endOnFailure: true
    })
    expect(details.failed).toBe(true)
    expect(brokenIn(details)).toContain("no-double-apply")
  })

  it.each(["leases-within-cap", "no-lease-while-paused"] as const)("runners whose store does not enforce the limits set break %s", async (invariant) => {
    const details = await fc.check(property({ adapter: "memory", profile: "limits", ignoresLimits: true }, [invariant]), {
      numRuns: propertyRuns(100, { min: 100 }),
      seed: 21,
      endOnFailure: true
    })
    expect(details.failed).toBe(true)
    expect(brokenIn(details)).toContain(invariant)
  })
})
