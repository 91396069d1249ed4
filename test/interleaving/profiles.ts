import type { ProviderScope } from "@connector-store/core"
import type { RequestFate } from "@connector-store/testkit"
import fc from "fast-check"
import type { LimitStep, WritePlan } from "./actors.js"
import { actorNames, DOCUMENTS, type LimitsPlan, type ScheduleConfig } from "./harness.js"
import { propertyRuns } from "../support/runs.js"

/**
 * Known violations awaiting their fix. Each entry names a defect today's
 * store has and the suite finds; while it is listed, the configuration that
 * triggers it is scoped (see `scopingFor`) and a test asserts the suite
 * still finds it unscoped. Once the fix is merged, remove the entry: the
 * scoping goes and the full configuration runs.
 */
export const KNOWN_VIOLATIONS_AWAITING_FIX: ReadonlyArray<KnownViolation> = []

/** The defects the suite may be told to scope around. */
export type KnownViolation = "relist-deletes-a-live-document" | "give-up-swallows-a-later-winner"

/** The configuration knobs a list of known violations turns on. */
export const scopingFor = (known: ReadonlyArray<KnownViolation>) => ({
  /** The relist applier looks at the provider before deleting (hides stale and clock-ordered candidates). */
  applierConfirms: known.includes("relist-deletes-a-live-document"),
  /** An ingress waits while a verification of its document is in flight (hides a give-up that records a winner which moved after the claim). */
  ingressWaitsForVerifiers: known.includes("give-up-swallows-a-later-winner")
})

/** The configurations the suite runs, by what they stress. */
export type Profile = "write-back" | "watches" | "relist" | "everything" | "limits"

/**
 * The fates a schedule's requests meet: applied and answered; refused
 * before applying (503, 429, 422, 401); applied then 502; applied and never
 * answered; lost on the way. (The provider's refusals its entities call
 * for, 404, 409, 410 and 412, come from the entities themselves; an offline
 * network and an expiring grant are the testkit's `checkRunnerLoop`'s and
 * the simulation's.)
 */
export const SCHEDULE_FATES: ReadonlyArray<RequestFate> = ["ok", "503", "429", "422", "401", "502-after-apply", "applied-no-answer", "lost"]

const fate: fc.Arbitrary<RequestFate> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<RequestFate>("ok") },
  { weight: 3, arbitrary: fc.constantFrom(...SCHEDULE_FATES.filter((f) => f !== "ok")) }
)
const doc = fc.constantFrom(...DOCUMENTS)
const writePlan: fc.Arbitrary<WritePlan> = fc.record({
  documentID: doc,
  kind: fc.constantFrom<WritePlan["kind"]>("update", "update", "create-deterministic", "create-reconcile")
})
/** Under limits, a 429 (its Retry-After pausing the account) is the likeliest fate. */
const limitsFate: fc.Arbitrary<RequestFate> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<RequestFate>("ok") },
  { weight: 5, arbitrary: fc.constant<RequestFate>("429") },
  { weight: 2, arbitrary: fc.constantFrom(...SCHEDULE_FATES.filter((f) => f !== "ok" && f !== "429")) }
)
const account = (connectorName: string, accountKey: string) => ({ connectorName, accountKey })
/** The scopes a run's limits name: the accounts documents may go out through, and their connectors. */
const limitScope: fc.Arbitrary<ProviderScope> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ connectorName: "gcal", accountKey: "acct-1" }) },
  { weight: 2, arbitrary: fc.constant({ connectorName: "gcal" }) },
  { weight: 2, arbitrary: fc.constant({ connectorName: "gcal", accountKey: "acct-2" }) },
  { weight: 1, arbitrary: fc.constantFrom<ProviderScope>({ connectorName: "gcal", accountKey: "acct-3" }, { connectorName: "outlook", accountKey: "acct-1" }, { connectorName: "outlook" }) }
)
const limitStep: fc.Arbitrary<LimitStep> = fc.oneof(
  fc.record({ kind: fc.constant("cap" as const), scope: limitScope, maxInFlight: fc.constantFrom(1, 2, null) }),
  fc.record({ kind: fc.constant("pause" as const), scope: limitScope, ms: fc.constantFrom(300, 1_000, 3_000) }),
  fc.record({ kind: fc.constant("resume" as const), scope: limitScope })
)
/** D1 on gcal/acct-1, D2 beside it or on acct-2, D3 on acct-2, acct-3 or another connector's acct-1; caps of 1 or 2 on some scopes. */
const limitsPlan: fc.Arbitrary<LimitsPlan> = fc.record({
  accounts: fc.tuple(
    fc.constantFrom(account("gcal", "acct-1"), account("gcal", "acct-2")),
    fc.constantFrom(account("gcal", "acct-2"), account("gcal", "acct-3"), account("outlook", "acct-1"))
  ).map(([d2, d3]) => ({ D1: account("gcal", "acct-1"), D2: d2, D3: d3 })),
  caps: fc.array(fc.record({ kind: fc.constant("cap" as const), scope: limitScope, maxInFlight: fc.constantFrom(1, 2) }), { minLength: 1, maxLength: 3 }),
  backlog: fc.array(writePlan, { maxLength: 4 }),
  retryAfterMs: fc.constantFrom(200, 1_000, 2_500)
})
/** The limits fields of a configuration that runs without provider limits. */
const withoutLimits = {
  limiters: fc.constant([]),
  limits: fc.constant(null),
  waitsForAnswers: fc.constant(false)
}
/** The write-back world's writers, sweepers and operators, which the limits world shares (no ingress, no deleters). */
const writeBackActors = {
  writers: fc.array(fc.array(writePlan, { minLength: 1, maxLength: 2 }), { minLength: 2, maxLength: 3 }),
  sweepers: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 2 }),
  ingress: fc.constant([]),
  deleters: fc.constant([]),
  operators: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 1 })
}
const steps = (back: boolean) =>
  fc.array(fc.constantFrom(...[300, 800, 1_500, 3_000, ...(back ? [-2_000, -6_000] : [])]), { minLength: 1, maxLength: 4 })

const cast = (profile: Profile) => {
  switch (profile) {
    case "write-back":
      return fc.record({
        ...writeBackActors,
        retention: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 1 }),
        relists: fc.constant([]),
        batchers: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 2 }),
        clockSteps: steps(true),
        ...withoutLimits
      })
    case "watches":
      return fc.record({
        writers: fc.array(fc.array(writePlan, { minLength: 1, maxLength: 1 }), { maxLength: 1 }),
        sweepers: fc.array(fc.integer({ min: 2, max: 4 }), { minLength: 1, maxLength: 2 }),
        ingress: fc.array(fc.array(fc.constantFrom("D1", "D2"), { minLength: 2, maxLength: 4 }), { minLength: 1, maxLength: 2 }),
        deleters: fc.constant([]),
        operators: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 1 }),
        retention: fc.constant([]),
        relists: fc.constant([]),
        batchers: fc.constant([]),
        clockSteps: steps(true),
        ...withoutLimits
      })
    case "relist":
      return fc.record({
        writers: fc.array(fc.array(writePlan, { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 2 }),
        sweepers: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 1 }),
        ingress: fc.constant([]),
        deleters: fc.array(fc.array(doc, { minLength: 1, maxLength: 2 }), { maxLength: 1 }),
        operators: fc.constant([]),
        retention: fc.constant([]),
        relists: fc.array(fc.integer({ min: 1, max: 2 }), { minLength: 1, maxLength: 2 }),
        batchers: fc.constant([]),
        clockSteps: steps(true),
        ...withoutLimits
      })
    case "limits":
      return fc.record({
        ...writeBackActors,
        retention: fc.constant([]),
        relists: fc.constant([]),
        batchers: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 2 }),
        clockSteps: steps(true),
        limiters: fc.array(fc.array(limitStep, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 1 }),
        limits: limitsPlan,
        waitsForAnswers: fc.boolean()
      })
    case "everything":
      return fc.record({
        writers: fc.array(fc.array(writePlan, { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 2 }),
        sweepers: fc.array(fc.integer({ min: 1, max: 2 }), { minLength: 1, maxLength: 2 }),
        ingress: fc.array(fc.array(doc, { minLength: 1, maxLength: 2 }), { maxLength: 1 }),
        deleters: fc.array(fc.array(doc, { minLength: 1, maxLength: 1 }), { maxLength: 1 }),
        operators: fc.array(fc.integer({ min: 1, max: 1 }), { maxLength: 1 }),
        retention: fc.array(fc.integer({ min: 1, max: 1 }), { maxLength: 1 }),
        relists: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 1 }),
        batchers: fc.array(fc.integer({ min: 1, max: 1 }), { maxLength: 1 }),
        clockSteps: steps(true),
        ...withoutLimits
      })
  }
}

/** Options of a configuration arbitrary. */
export interface ConfigOptions {
  readonly adapter: ScheduleConfig["adapter"]
  readonly profile: Profile
  /** The known violations to scope around (the list above by default). */
  readonly known?: ReadonlyArray<KnownViolation>
  /** A runner that sends plainly whatever the reissue says (sensitivity checks). */
  readonly ignoresReissue?: boolean
  /** Runners whose store does not enforce the limits set (sensitivity checks). */
  readonly ignoresLimits?: boolean
}

/** A schedule's configuration: its cast, crash plans (each actor may die at one of its points) and request fates. */
export const configArbitrary = (options: ConfigOptions): fc.Arbitrary<ScheduleConfig> =>
  cast(options.profile).chain((c) =>
    fc.record({
      crashes: fc.array(fc.tuple(fc.constantFrom(...actorNames(c)), fc.integer({ min: 1, max: 30 })), { maxLength: 2 }),
      fates: fc.array(options.profile === "limits" ? limitsFate : fate, { maxLength: 12 })
    }).map(({ crashes, fates }): ScheduleConfig => ({
      adapter: options.adapter,
      ...c,
      crashes,
      fates,
      flavour: { ignoresReissue: options.ignoresReissue ?? false, ignoresLimits: options.ignoresLimits ?? false },
      verifyAttempts: 2,
      ...scopingFor(options.known ?? KNOWN_VIOLATIONS_AWAITING_FIX)
    }))
  )

/**
 * The replay of one failure, from `CONNECTOR_STORE_INTERLEAVING_SEED` and
 * `CONNECTOR_STORE_INTERLEAVING_PATH` (as fast-check printed them), or
 * nothing when they are not set.
 */
export const replayParameters = (): { readonly seed: number; readonly path?: string; readonly endOnFailure: true } | Record<string, never> => {
  const seed = Number(process.env.CONNECTOR_STORE_INTERLEAVING_SEED)
  if (!Number.isInteger(seed)) return {}
  const path = process.env.CONNECTOR_STORE_INTERLEAVING_PATH
  return path === undefined || path === "" ? { seed, endOnFailure: true } : { seed, path, endOnFailure: true }
}

/** Runs per configuration: `CONNECTOR_STORE_INTERLEAVING_RUNS`, else the CI default scaled as every property's (`propertyRuns`). */
export const interleavingRuns = (ciDefault: number): number => {
  const raw = process.env.CONNECTOR_STORE_INTERLEAVING_RUNS
  const n = raw === undefined ? NaN : Number(raw)
  return Number.isInteger(n) && n > 0 ? n : propertyRuns(ciDefault)
}
