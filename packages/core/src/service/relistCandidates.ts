import { Clock, Effect, Option } from "effect"
import { refuseCorruptRows } from "../ports/CorruptRows.js"
import type { ConcurrentUpdateExhausted, CorruptRow, InvalidInput, PersistenceError } from "../errors.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { RelistRepository, type SourcePage } from "../ports/RelistRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
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
import {
  APPLY_FAILURE,
  CANDIDATE_IDENTITY_SHAPE,
  candidateKind,
  candidateRefChecks,
  flag,
  fraction,
  PAGE,
  SCOPE_SHAPE,
  scopeChecks,
  sweepOutcome
} from "../relist/checks.js"
import { deletionLimitFor, exceedsDeletionLimit } from "../relist/derivation.js"
import {
  DeletionLimitExceeded,
  RelistRunNotComplete,
  RelistRunNotFound,
  SweepApplyFailed,
  SweepCandidateNotFound,
  SweepCandidateWithdrawn,
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
import { type SweepCandidateBasis, withdrawalOf } from "../relist/withdrawal.js"
import { allOptionNames } from "../optionNames.js"
import { fieldsOf, identityChecks, type InputShape, openShapeOf, optional, Rules, taking, validate, validated } from "../validation.js"
import { type Millis, watchIdentityOf, watchKey } from "../watch/ProjectionWatch.js"
import { requireWon, retryOnLostRace } from "./run.js"

/** Names one candidate of one run, as `listSweepCandidates` returned it. */
export interface SweepCandidateRef {
  readonly runID: string
  readonly sourceID: string
}

/** The options of `listSweepCandidates`: a keyset page, a kind filter, and the deletion safety limit. */
export interface SweepCandidateListOptions extends SourcePage {
  readonly kind?: SweepCandidateKind | undefined
  /**
   * Refuse (`DeletionLimitExceeded`) to list deletions past this fraction of the tracked set; absent, `deletionLimitFor`'s
   * default holds, `1` lifts it.
   */
  readonly maxDeletionFraction?: number | undefined
  /** Lists deletions beyond `maxDeletionFraction` anyway: for a caller (or person) that checked. */
  readonly acceptDeletionsBeyondLimit?: boolean | undefined
}

/**
 * An applier's work for one decided candidate, run by `applySweepCandidate` in the store's transaction with the candidate, slot
 * and watch locked; it must not call the store.
 */
export type SweepApply = (candidate: SweepCandidate) => Effect.Effect<void, unknown>

/** What happens to a candidate call aimed at a run that is no longer complete and current. */
export type StaleRelistRun = "stale-run"

type CandidateErrors = InvalidInput | RelistRunNotFound | SweepCandidateNotFound | PersistenceError | ConcurrentUpdateExhausted | CorruptRow

/** What deciding or applying a candidate may fail with besides the common errors: it was withdrawn. */
type ActingErrors = CandidateErrors | SweepCandidateWithdrawn

/** A candidate reference: both parts are required, so a whole candidate will do (other keys are not read). */
const CANDIDATE_REF_SHAPE: InputShape = openShapeOf(allOptionNames<SweepCandidateRef>()(["runID", "sourceID"]))

/** The options of `listSweepCandidates`. */
const CANDIDATE_LIST = fieldsOf<SweepCandidateListOptions>("options", {
  after: optional(Rules.id),
  limit: Rules.positiveInt,
  kind: optional(candidateKind),
  maxDeletionFraction: optional(fraction),
  acceptDeletionsBeyondLimit: optional(flag)
})

/** The candidate half of the relist sweep's Effect API. */
export interface SweepCandidateMethods {
  /**
   * A page of a complete, current run's open and decided candidates that still stand (`withdrawalOf`); any other run fails with
   * `RelistRunNotComplete`.
   */
  readonly listSweepCandidates: (
    runID: string,
    options: SweepCandidateListOptions
  ) => Effect.Effect<
    ReadonlyArray<SweepCandidate>,
    InvalidInput | RelistRunNotFound | RelistRunNotComplete | DeletionLimitExceeded | PersistenceError | CorruptRow
  >
  /**
   * Records what to do about a candidate (`decideSweepOutcome`), re-deriving it first with its rows locked: a withdrawn one
   * fails with `SweepCandidateWithdrawn`.
   */
  readonly recordSweepOutcome: (
    ref: SweepCandidateRef,
    outcome: SweepOutcome
  ) => Effect.Effect<"recorded" | "given-up" | "settled" | StaleRelistRun, ActingErrors | SweepOutcomeNotAllowed>
  /** Marks a decided candidate applied (`decideSweepApplied`), re-derived as `recordSweepOutcome` does. */
  readonly markSweepCandidateApplied: (ref: SweepCandidateRef) => Effect.Effect<SweepApplyOutcome | StaleRelistRun, ActingErrors>
  /**
   * Applies a decided candidate and marks it applied in one transaction: re-derived first, then `apply` runs with the
   * candidate, slot and watch locked (on the SQL adapters, on the transaction's connection), so no write-back lands between
   * check and apply. `apply` failing fails the call with `SweepApplyFailed` and rolls everything back; it may run again on a
   * lost race, so work outside the transaction must be idempotent.
   */
  readonly applySweepCandidate: (
    ref: SweepCandidateRef,
    apply: SweepApply
  ) => Effect.Effect<SweepApplyOutcome | StaleRelistRun, ActingErrors | SweepApplyFailed>
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
  ) => Effect.Effect<Option.Option<SweepCandidate>, InvalidInput | PersistenceError | CorruptRow>
  /** A page of the scope's given-up candidates: what the sweep will not retry until a person re-arms it. */
  readonly listGivenUpSweepCandidates: (
    scope: RelistScope,
    page: SourcePage
  ) => Effect.Effect<ReadonlyArray<SweepCandidate>, InvalidInput | PersistenceError>
}

/** Builds the candidate methods over the ports. */
export const makeSweepCandidateMethods = Effect.gen(function*() {
  const relist = yield* RelistRepository
  const watches = yield* WatchRepository
  const operations = yield* OperationRepository
  const { withTransaction } = yield* Transactor

  const findRun = (method: string, runID: string) =>
    Effect.flatMap(relist.getRun(runID), (found) => Effect.mapError(found, () => new RelistRunNotFound({ method, runID })))

  /** The bases of a page of candidates in a few set-based reads; an undecodable row fails the read. */
  const basesOf = (runID: string, rows: ReadonlyArray<SweepCandidate>) =>
    refuseCorruptRows(Effect.gen(function*() {
      const documentIDs = Array.from(new Set(rows.map((row) => row.documentID)))
      const documentWatches = yield* watches.listByDocuments(documentIDs)
      const documentOperations = yield* operations.listByDocuments(documentIDs)
      const baseline = new Map((yield* relist.getBaseline(runID, rows.map((row) => row.sourceID))).map((e) => [e.sourceID, e]))
      const byKey = new Map(documentWatches.map((watch) => [watchKey(watch), watch]))
      return (row: SweepCandidate): SweepCandidateBasis => ({
        watch: byKey.get(watchKey(row)),
        baseline: baseline.get(row.sourceID),
        documentWatches: documentWatches.filter((watch) => watch.documentID === row.documentID).map(watchIdentityOf),
        documentOperations: documentOperations.filter((op) => op.documentID === row.documentID).map((op) => op.state)
      })
    }))

  /** The basis of one candidate about to be acted on: its document's slot, then its watch, locked until the transaction ends. */
  const lockedBasisOf = (runID: string, row: SweepCandidate) =>
    refuseCorruptRows(Effect.gen(function*() {
      yield* watches.lockDocument({ ownerDID: row.ownerDID, model: row.model, documentID: row.documentID })
      const watch = Option.getOrUndefined(yield* watches.lockRead(row))
      const documentWatches = yield* watches.listByDocuments([row.documentID])
      const documentOperations = yield* operations.listByDocuments([row.documentID])
      const [baseline] = yield* relist.getBaseline(runID, [row.sourceID])
      return {
        watch,
        baseline,
        documentWatches: documentWatches.filter((other) => other.documentID === row.documentID).map(watchIdentityOf),
        documentOperations: documentOperations.filter((op) => op.documentID === row.documentID).map((op) => op.state)
      } satisfies SweepCandidateBasis
    }))

  /** Re-derives an open or decided candidate against its locked basis, failing with `SweepCandidateWithdrawn`. */
  const standing = (method: string) => (runID: string, row: SweepCandidate) =>
    row.status !== "open" && row.status !== "decided" ? Effect.void : Effect.flatMap(lockedBasisOf(runID, row), (basis) => {
      const reason = withdrawalOf(row, basis)
      return reason === undefined ? Effect.void : Effect.fail(
        new SweepCandidateWithdrawn({ method, runID, sourceID: row.sourceID, documentID: row.documentID, kind: row.kind, reason })
      )
    })

  /**
   * One read-decide-write on a run's candidate, retried on a lost race: the candidate is locked before the run's state is read;
   * `guard` runs before the decision.
   */
  const transition = <O extends string, E, G = never>(
    method: string,
    ref: SweepCandidateRef,
    decide: (row: SweepCandidate, now: Millis) => Effect.Effect<SweepCandidateDecision<O>, E>,
    guard: (runID: string, row: SweepCandidate) => Effect.Effect<void, G | PersistenceError> = () => Effect.void
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
        yield* guard(run.runID, row)
        const decision = yield* decide(row, yield* Clock.currentTimeMillis)
        if (decision.next !== undefined) yield* requireWon(yield* relist.updateCandidate(decision.next, row.version))
        return decision.outcome
      }))
    )

  const methods: SweepCandidateMethods = {
    listSweepCandidates: taking("listSweepCandidates", ["runID", "options"], [undefined, CANDIDATE_LIST.shape], (
      runID: string,
      options: SweepCandidateListOptions
    ) =>
      Effect.gen(function*() {
        const method = "listSweepCandidates"
        yield* validate(method, CANDIDATE_LIST.checks(options, [["runID", runID, Rules.id]]))
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
        // Each stored page is re-derived; withdrawn rows are left out and the
        // next stored page read, so a short page still means the end.
        const standing: Array<SweepCandidate> = []
        let after = options.after
        for (;;) {
          const rows = yield* relist.listCandidates(runID, { after, limit: options.limit, kind: options.kind })
          const basis = yield* basesOf(runID, rows)
          for (const row of rows) {
            if (standing.length < options.limit && withdrawalOf(row, basis(row)) === undefined) standing.push(row)
          }
          const last = rows.at(-1)
          if (rows.length < options.limit || standing.length >= options.limit || last === undefined) break
          after = last.sourceID
        }
        // Rows come back only while the run is complete; an empty page must
        // not hide that it ended in between.
        if (standing.length === 0) yield* refuseUnlessComplete(yield* findRun(method, runID))
        return standing
      })),

    recordSweepOutcome: taking("recordSweepOutcome", ["ref", "outcome"], [CANDIDATE_REF_SHAPE], (ref: SweepCandidateRef, outcome: SweepOutcome) =>
      validated("recordSweepOutcome", [...candidateRefChecks("ref", ref), ["outcome", outcome, sweepOutcome]],
        () => transition("recordSweepOutcome", ref, (row, now) => {
          const decision = decideSweepOutcome(row, outcome, now)
          if (decision.outcome === "not-allowed") {
            return Effect.fail(new SweepOutcomeNotAllowed({ runID: ref.runID, sourceID: ref.sourceID, kind: row.kind, outcome }))
          }
          return Effect.succeed(decision as SweepCandidateDecision<"recorded" | "given-up" | "settled">)
        }, standing("recordSweepOutcome"))
      )),

    markSweepCandidateApplied: taking("markSweepCandidateApplied", ["ref"], [CANDIDATE_REF_SHAPE], (ref: SweepCandidateRef) =>
      validated("markSweepCandidateApplied", candidateRefChecks("ref", ref),
        () => transition("markSweepCandidateApplied", ref, (row, now) => Effect.succeed(decideSweepApplied(row, now)), standing("markSweepCandidateApplied"))
      )),

    applySweepCandidate: taking("applySweepCandidate", ["ref", "apply"], [CANDIDATE_REF_SHAPE], (ref: SweepCandidateRef, apply: SweepApply) =>
      validated("applySweepCandidate", [...candidateRefChecks("ref", ref), ["apply", apply, Rules.callback]],
        () =>
          transition("applySweepCandidate", ref, (row, now) => {
            const decision = decideSweepApplied(row, now)
            if (decision.next === undefined) return Effect.succeed(decision)
            return Effect.as(
              Effect.mapError(
                Effect.suspend(() => apply(row)),
                (cause) =>
                  new SweepApplyFailed({ method: "applySweepCandidate", runID: row.runID, sourceID: row.sourceID, documentID: row.documentID, cause })
              ),
              decision
            )
          }, standing("applySweepCandidate"))
      )),

    recordSweepApplyFailure: taking("recordSweepApplyFailure", ["ref", "failure"], [CANDIDATE_REF_SHAPE, APPLY_FAILURE.shape], (
      ref: SweepCandidateRef,
      failure: SweepApplyFailure
    ) =>
      validated("recordSweepApplyFailure", APPLY_FAILURE.checks(failure, candidateRefChecks("ref", ref)),
        () => transition("recordSweepApplyFailure", ref, (row, now) =>
          Effect.succeed(decideSweepApplyFailure(row, { kind: failure.kind, message: failure.message }, now)))
      )),

    rearmSweepCandidate: taking("rearmSweepCandidate", ["identity"], [CANDIDATE_IDENTITY_SHAPE], (identity: SweepCandidateIdentity) =>
      validated("rearmSweepCandidate", identityChecks("identity", identity),
        () => retryOnLostRace("rearmSweepCandidate", formatCandidateIdentity(identity), withTransaction(Effect.gen(function*() {
          const row = Option.getOrUndefined(yield* relist.lockCandidate(identity))
          if (row === undefined) {
            return yield* new SweepCandidateNotFound({ method: "rearmSweepCandidate", runID: null, sourceID: identity.sourceID })
          }
          const decision = decideSweepRearm(row, yield* Clock.currentTimeMillis)
          if (decision.next !== undefined) yield* requireWon(yield* relist.updateCandidate(decision.next, row.version))
          return decision.outcome
        })))
      )),

    getSweepCandidate: taking("getSweepCandidate", ["identity"], [CANDIDATE_IDENTITY_SHAPE], (identity: SweepCandidateIdentity) =>
      validated("getSweepCandidate", identityChecks("identity", identity), () => relist.getCandidate(identity))),

    listGivenUpSweepCandidates: taking("listGivenUpSweepCandidates", ["scope", "page"], [SCOPE_SHAPE, PAGE.shape], (scope: RelistScope, page: SourcePage) =>
      validated("listGivenUpSweepCandidates", PAGE.checks(page, scopeChecks("scope", scope)),
        () => relist.listGivenUp(relistScopeOf(scope), { after: page.after, limit: page.limit })
      ))
  }
  return methods
})
