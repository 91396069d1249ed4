import { Data } from "effect"
import type { RelistRunState } from "./RelistRun.js"
import type { SweepCandidateKind, SweepOutcome } from "./SweepCandidate.js"
import type { SweepCandidateWithdrawal } from "./withdrawal.js"

/** No relist run has this id (it never existed, or retention collected it). */
export class RelistRunNotFound extends Data.TaggedError("RelistRunNotFound")<{
  readonly method: string
  readonly runID: string
}> {
  override get message(): string {
    return `${this.method}: no relist run ${this.runID}`
  }
}

/** Candidates were asked of a run that is not complete and current: it yields none, ever (an error, never an empty list). */
export class RelistRunNotComplete extends Data.TaggedError("RelistRunNotComplete")<{
  readonly method: string
  readonly runID: string
  readonly state: Exclude<RelistRunState, "complete">
}> {
  override get message(): string {
    return `${this.method}: relist run ${this.runID} is ${this.state}, not complete; it yields no candidates`
  }
}

/** The run found more deletions than `maxDeletionFraction` of its tracked set allows; nothing was listed. */
export class DeletionLimitExceeded extends Data.TaggedError("DeletionLimitExceeded")<{
  readonly runID: string
  readonly deletions: number
  readonly tracked: number
  readonly maxDeletionFraction: number
}> {
  override get message(): string {
    return `listSweepCandidates: relist run ${this.runID} would delete ${this.deletions} of ${this.tracked} tracked documents, above the limit of ${this.maxDeletionFraction}`
  }
}

/** The run has no candidate for this source id. */
export class SweepCandidateNotFound extends Data.TaggedError("SweepCandidateNotFound")<{
  readonly method: string
  readonly runID: string | null
  readonly sourceID: string
}> {
  override get message(): string {
    return `${this.method}: no sweep candidate for source ${this.sourceID}${this.runID === null ? "" : ` in relist run ${this.runID}`}`
  }
}

/** `delete_local` was chosen for an entity the run saw at the provider; only a deletion candidate may be deleted locally. */
export class SweepOutcomeNotAllowed extends Data.TaggedError("SweepOutcomeNotAllowed")<{
  readonly runID: string
  readonly sourceID: string
  readonly kind: SweepCandidateKind
  readonly outcome: SweepOutcome
}> {
  override get message(): string {
    return `recordSweepOutcome: ${this.outcome} is not allowed for a ${this.kind} candidate (source ${this.sourceID}, run ${this.runID})`
  }
}

/** The candidate no longer stands (`reason`: see `SweepCandidateWithdrawal`); nothing was recorded: do not act on it. */
export class SweepCandidateWithdrawn extends Data.TaggedError("SweepCandidateWithdrawn")<{
  readonly method: string
  readonly runID: string
  readonly sourceID: string
  readonly documentID: string
  readonly kind: SweepCandidateKind
  readonly reason: SweepCandidateWithdrawal
}> {
  override get message(): string {
    return `${this.method}: the ${this.kind} candidate for source ${this.sourceID} (document ${this.documentID}, relist run ${this.runID}) is withdrawn: ${this.reason}`
  }
}

/** The `apply` callback of `applySweepCandidate` failed (`cause`): its transaction rolled back, nothing marked or written. */
export class SweepApplyFailed extends Data.TaggedError("SweepApplyFailed")<{
  readonly method: string
  readonly runID: string
  readonly sourceID: string
  readonly documentID: string
  readonly cause: unknown
}> {
  override get message(): string {
    return `${this.method}: applying the candidate for source ${this.sourceID} (document ${this.documentID}, relist run ${this.runID}) failed: ${
      this.cause instanceof Error ? this.cause.message : String(this.cause)
    }`
  }
}
