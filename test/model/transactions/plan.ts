import {
  type ConnectorOperation,
  OperationRepository,
  type PersistenceError,
  type ProjectionWatch,
  type WatchIdentity,
  WatchRepository
} from "@connector-store/core"
import { Data, Effect, Option } from "effect"
import fc from "fast-check"
import { DOCUMENTS, IDENTITIES, labelOf, operationRow } from "../universe.js"

/** One read or write a transaction makes through the ports. */
export type Step =
  | { readonly kind: "insertWatch"; readonly identity: WatchIdentity; readonly documentID: string }
  | { readonly kind: "bumpWatch"; readonly identity: WatchIdentity }
  | { readonly kind: "deleteWatch"; readonly identity: WatchIdentity }
  | { readonly kind: "readWatch"; readonly identity: WatchIdentity }
  | { readonly kind: "insertOperation"; readonly operationID: string }

/** How a transaction ends: it commits, or it is abandoned after `after` steps. */
export type Ending =
  | { readonly kind: "commit" }
  | { readonly kind: "fail" | "die" | "interrupt"; readonly after: number }

/** A transaction to run: its steps, then its ending. */
export interface Plan {
  readonly steps: ReadonlyArray<Step>
  readonly ending: Ending
}

/** The test's own failure, raised to abandon a transaction. */
export class Abandoned extends Data.TaggedError("Abandoned")<{}> {}

// Four identities over three documents: inserts clash on (owner, model, document) often.
const identities = IDENTITIES.filter((id) => id.sourceID === "src-1")
const identityArb = fc.constantFrom(...identities)

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("insertWatch" as const), identity: identityArb, documentID: fc.constantFrom(...DOCUMENTS.slice(0, 3)) }),
  fc.record({ kind: fc.constant("bumpWatch" as const), identity: identityArb }),
  fc.record({ kind: fc.constant("deleteWatch" as const), identity: identityArb }),
  fc.record({ kind: fc.constant("readWatch" as const), identity: identityArb }),
  fc.record({ kind: fc.constant("insertOperation" as const), operationID: fc.constantFrom("op-1", "op-2", "op-3") })
)

/** A transaction of 1–5 steps that commits about half the time. */
export const planArb: fc.Arbitrary<Plan> = fc.array(stepArb, { minLength: 1, maxLength: 5 }).chain((steps) =>
  fc.oneof(
    fc.constant<Ending>({ kind: "commit" }),
    fc.record({
      kind: fc.constantFrom("fail" as const, "die" as const, "interrupt" as const),
      after: fc.integer({ min: 0, max: steps.length })
    })
  ).map((ending): Plan => ({ steps, ending }))
)

/** How a step reads in a command's name. */
export const stepLabel = (step: Step): string =>
  step.kind === "insertOperation"
    ? `insertOperation(${step.operationID})`
    : step.kind === "insertWatch"
    ? `insertWatch(${labelOf(step.identity)}, ${step.documentID})`
    : `${step.kind}(${labelOf(step.identity)})`

/** How a plan reads in a command's name. */
export const planLabel = (plan: Plan): string =>
  `[${plan.steps.map(stepLabel).join("; ")}] then ${
    plan.ending.kind === "commit" ? "commit" : `${plan.ending.kind} after ${plan.ending.after}`
  }`

const watchRow = (identity: WatchIdentity, documentID: string): ProjectionWatch => ({
  ...identity,
  documentID,
  verifiedStateDigest: null,
  observedWinnerDigest: null,
  verificationStatus: "pending_verification",
  verificationAttempts: 0,
  repairGeneration: 0,
  nextAttemptAt: null,
  claimedUntil: null,
  deferReason: null,
  version: 0,
  createdAt: 1,
  updatedAt: 1
})

const operation = (operationID: string): ConnectorOperation =>
  operationRow({
    callerDID: "did:caller:x",
    operationID,
    ownerDID: "did:owner:a",
    connectorName: "gcal",
    documentID: null,
    state: "attempted",
    attempts: 0,
    nextAttemptAt: null,
    deferReason: null,
    version: 0,
    leaseToken: null,
    leaseExpiresAt: null,
    createdAt: 1,
    updatedAt: 1
  })

/**
 * Runs one step on the ports and says what it saw, in the words the model
 * uses: `true`/`false` for inserts, `v<n>` or `absent` for the rest.
 */
export const runStep = (
  step: Step
): Effect.Effect<string, PersistenceError, WatchRepository | OperationRepository> =>
  Effect.gen(function*() {
    const watches = yield* WatchRepository
    if (step.kind === "insertOperation") {
      const operations = yield* OperationRepository
      return String(yield* operations.insert(operation(step.operationID)))
    }
    if (step.kind === "insertWatch") return String(yield* watches.insert(watchRow(step.identity, step.documentID)))
    if (step.kind === "readWatch") {
      return Option.match(yield* watches.get(step.identity), { onNone: () => "absent", onSome: (row) => `v${row.version}` })
    }
    const row = Option.getOrUndefined(yield* watches.lockRead(step.identity))
    if (row === undefined) return "absent"
    if (step.kind === "deleteWatch") return (yield* watches.delete(step.identity, row.version)) ? "deleted" : "lost"
    const next = { ...row, version: row.version + 1 }
    return (yield* watches.update(row, next)) ? `v${next.version}` : "lost"
  })

/** Ends a transaction the way its plan says, failing it in one of three ways. */
export const abandon = (ending: Ending): Effect.Effect<never, Abandoned> =>
  ending.kind === "die" ? Effect.die(new Error("a defect inside the transaction")) :
  ending.kind === "interrupt" ? Effect.interrupt :
  Effect.fail(new Abandoned())
