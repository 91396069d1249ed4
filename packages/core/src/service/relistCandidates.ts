import { Clock, Effect, Option } from "effect"
import type { ConcurrentUpdateExhausted, InvalidInput, PersistenceError } from "../errors.js"
import { RelistRepository, type SourcePage } from "../ports/RelistRepository.js"
import { Transactor } from "../ports/Transactor.js"
import {
  type SweepApplyFailure,
  type SweepApplyFailureOutcome,
  type SweepApplyOutcome,
  belongsToRun,
  type SweepCandidateDecision,
  candidateRunStanding,
  decideSweepApplied,
  decideSweepApplyFailure,
  decideSweepRearm,
  decideSweepOutcome,
  type SweepRearmOutcome
} from "../relist/candidates.js"
import { afterValidation, candidateKind, candidateRefChecks, flag, fraction, pageChecks, scopeChecks, sweepOutcome } from "../relist/checks.js"
import { deletionLimitFor, exceedsDeletionLimit } from "../relist/derivation.js"
import {
  DeletionLimitExceeded,
  RelistRunNotComplete,
  RelistRunNotFound,
  SweepCandidateNotFound,
  SweepOutcomeNotAllowed
} from "../relist/errors.js"
import { type RelistRun, type RelistScope, relistScopeOf } from "../relist/RelistRun.js"
import {
  formatCandidateIdentity,
  type SweepCandidate,
  type SweepCandidateIdentity,
  type SweepCandidateKind,
  type SweepOutcome
} from "../relist/SweepCandidate.js"
import { fieldOf, identityChecks, optional, Rules, validate } from "../validation.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import { requireWon, retryOnLostRace } from "./cas.js"

/** Names one candidate of one run, as `listSweepCandidates` returned it. */
export interface SweepCandidateRef {
  readonly runID: string
  readonly sourceID: string
}

/** The options of `listSweepCandidates`: a keyset page, a kind filter, and the deletion safety limit. */
export interface SweepCandidateListOptions extends SourcePage {
  readonly kind?: SweepCandidateKind | undefined
  /**
   * Refuse (with `DeletionLimitExceeded`) to list deletions when the run
   * derived more than this fraction of its tracked set. When absent, the
   * default limit holds (`deletionLimitFor`: half the tracked set, once a run
   * tracked two documents or more); `1` lifts it.
   */
  readonly maxDeletionFraction?: number | undefined
  /** Lists deletions beyond `maxDeletionFraction` anyway: for a caller (or person) that checked. */
  readonly acceptDeletionsBeyondLimit?: boolean | undefined
}

/** What happens to a candidate call aimed at a run that is no longer complete and current. */
export type StaleRelistRun = "stale-run"

type CandidateErrors = InvalidInput | RelistRunNotFound | SweepCandidateNotFound | PersistenceError | ConcurrentUpdateExhausted

/** The candidate half of the relist sweep's Effect API. */
export interface SweepCandidateMethods {
  /**
   * A page of the open and decided candidates of a complete, current run.
   * Any other run fails with `RelistRunNotComplete`: an incomplete,
   * abandoned or superseded run yields no candidates, ever. Given-up,
   * applied and kept candidates are not listed.
   */
  readonly listSweepCandidates: (
    runID: string,
    options: SweepCandidateListOptions
  ) => Effect.Effect<
    ReadonlyArray<SweepCandidate>,
    InvalidInput | RelistRunNotFound | RelistRunNotComplete | DeletionLimitExceeded | PersistenceError
  >
  /** Records what to do about a candidate (see `decideSweepOutcome`). */
  readonly recordSweepOutcome: (
    ref: SweepCandidateRef,
    outcome: SweepOutcome
  ) => Effect.Effect<"recorded" | "given-up" | "settled" | StaleRelistRun, CandidateErrors | SweepOutcomeNotAllowed>
  /** Marks a decided candidate applied (see `decideSweepApplied`); never a given-up one. */
  readonly markSweepCandidateApplied: (ref: SweepCandidateRef) => Effect.Effect<SweepApplyOutcome | StaleRelistRun, CandidateErrors>
  /** Counts a failed apply; the fifth gives the candidate up (see `decideSweepApplyFailure`). */
  readonly recordSweepApplyFailure: (
    ref: SweepCandidateRef,
    failure: SweepApplyFailure
  ) => Effect.Effect<SweepApplyFailureOutcome | StaleRelistRun, CandidateErrors>
  /** A person re-arms a given-up candidate (see `decideSweepRearm`). */
  readonly rearmSweepCandidate: (identity: SweepCandidateIdentity) => Effect.Effect<SweepRearmOutcome, CandidateErrors>
  /** A candidate by identity, whatever its status or run. */
  readonly getSweepCandidate: (
    identity: SweepCandidateIdentity
  ) => Effect.Effect<Option.Option<SweepCandidate>, InvalidInput | PersistenceError>
  /** A page of the scope's given-up candidates: what the sweep will not retry until a person re-arms it. */
  readonly listGivenUpSweepCandidates: (
    scope: RelistScope,
    page: SourcePage
  ) => Effect.Effect<ReadonlyArray<SweepCandidate>, InvalidInput | PersistenceError>
}

/** Builds the candidate methods over the ports. */
export const makeSweepCandidateMethods = Effect.gen(function*() {
  const relist = yield* RelistRepository
  const { withTransaction } = yield* Transactor

  const findRun = (method: string, runID: string) =>
    Effect.flatMap(relist.getRun(runID), Option.match({
      onNone: () => Effect.fail(new RelistRunNotFound({ method, runID })),
      onSome: (run: RelistRun) => Effect.succeed(run)
    }))

  /**
   * One read-decide-write on a run's candidate, retried on a lost race. The
   * candidate is locked before the run's state is read, so a newer run can
   * neither start-and-complete unseen in between nor rewrite the row under
   * the decision.
   */
  const transition = <O extends string, E>(
    method: string,
    ref: SweepCandidateRef,
    decide: (row: SweepCandidate, now: Millis) => Effect.Effect<SweepCandidateDecision<O>, E>
  ) =>
    retryOnLostRace(
      method,
      `relist run ${ref.runID} source ${ref.sourceID}`,
      withTransaction(Effect.gen(function*() {
        const scope = relistScopeOf(yield* findRun(method, ref.runID))
        const row = Option.getOrUndefined(yield* relist.lockCandidate({ ...scope, sourceID: ref.sourceID }))
        const run = yield* findRun(method, ref.runID)
        if (candidateRunStanding(run) === "stale-run") return "stale-run" as const
        if (!belongsToRun(row, run)) {
          return yield* new SweepCandidateNotFound({ method, runID: ref.runID, sourceID: ref.sourceID })
        }
        const decision = yield* decide(row, yield* Clock.currentTimeMillis)
        if (decision.next !== undefined) yield* requireWon(yield* relist.updateCandidate(decision.next, row.version))
        return decision.outcome
      }))
    )

  const methods: SweepCandidateMethods = {
    listSweepCandidates: (runID, options) =>
      Effect.gen(function*() {
        const method = "listSweepCandidates"
        yield* validate(method, [
          ["runID", runID, Rules.id],
          ...pageChecks("options", options),
          ["options.kind", fieldOf(options, "kind"), optional(candidateKind)],
          ["options.maxDeletionFraction", fieldOf(options, "maxDeletionFraction"), optional(fraction)],
          ["options.acceptDeletionsBeyondLimit", fieldOf(options, "acceptDeletionsBeyondLimit"), optional(flag)]
        ])
        const refuseUnlessComplete = (run: RelistRun) =>
          run.state === "complete" ? Effect.void : Effect.fail(new RelistRunNotComplete({ method, runID, state: run.state }))
        const run = yield* findRun(method, runID)
        yield* refuseUnlessComplete(run)
        const maxDeletionFraction = deletionLimitFor(run, options.maxDeletionFraction)
        if (
          options.kind !== "diverged" && maxDeletionFraction !== undefined &&
          options.acceptDeletionsBeyondLimit !== true && exceedsDeletionLimit(run, maxDeletionFraction)
        ) {
          return yield* new DeletionLimitExceeded({
            runID,
            deletions: run.deletionCount ?? 0,
            tracked: run.trackedCount ?? 0,
            maxDeletionFraction
          })
        }
        const rows = yield* relist.listCandidates(runID, { after: options.after, limit: options.limit, kind: options.kind })
        // Rows come back only while the run is complete; an empty page must
        // not hide that it ended in between.
        if (rows.length === 0) yield* refuseUnlessComplete(yield* findRun(method, runID))
        return rows
      }),

    recordSweepOutcome: (ref, outcome) =>
      afterValidation(
        validate("recordSweepOutcome", [...candidateRefChecks("ref", ref), ["outcome", outcome, sweepOutcome]]),
        () => transition("recordSweepOutcome", ref, (row, now) => {
          const decision = decideSweepOutcome(row, outcome, now)
          if (decision.outcome === "not-allowed") {
            return Effect.fail(new SweepOutcomeNotAllowed({ runID: ref.runID, sourceID: ref.sourceID, kind: row.kind, outcome }))
          }
          return Effect.succeed(decision as SweepCandidateDecision<"recorded" | "given-up" | "settled">)
        })
      ),

    markSweepCandidateApplied: (ref) =>
      afterValidation(
        validate("markSweepCandidateApplied", candidateRefChecks("ref", ref)),
        () => transition("markSweepCandidateApplied", ref, (row, now) => Effect.succeed(decideSweepApplied(row, now)))
      ),

    recordSweepApplyFailure: (ref, failure) =>
      afterValidation(
        validate("recordSweepApplyFailure", [
          ...candidateRefChecks("ref", ref),
          ["failure", failure, Rules.record],
          ["failure.kind", fieldOf(failure, "kind"), Rules.id],
          ["failure.message", fieldOf(failure, "message"), Rules.text]
        ]),
        () => transition("recordSweepApplyFailure", ref, (row, now) =>
          Effect.succeed(decideSweepApplyFailure(row, { kind: failure.kind, message: failure.message }, now)))
      ),

    rearmSweepCandidate: (identity) =>
      afterValidation(
        validate("rearmSweepCandidate", identityChecks("identity", identity)),
        () => retryOnLostRace("rearmSweepCandidate", formatCandidateIdentity(identity), withTransaction(Effect.gen(function*() {
          const row = Option.getOrUndefined(yield* relist.lockCandidate(identity))
          if (row === undefined) {
            return yield* new SweepCandidateNotFound({ method: "rearmSweepCandidate", runID: null, sourceID: identity.sourceID })
          }
          const decision = decideSweepRearm(row, yield* Clock.currentTimeMillis)
          if (decision.next !== undefined) yield* requireWon(yield* relist.updateCandidate(decision.next, row.version))
          return decision.outcome
        })))
      ),

    getSweepCandidate: (identity) =>
      afterValidation(validate("getSweepCandidate", identityChecks("identity", identity)), () => relist.getCandidate(identity)),

    listGivenUpSweepCandidates: (scope, page) =>
      afterValidation(
        validate("listGivenUpSweepCandidates", [...scopeChecks("scope", scope), ...pageChecks("page", page)]),
        () => relist.listGivenUp(relistScopeOf(scope), { after: page.after, limit: page.limit })
      )
  }
  return methods
})
