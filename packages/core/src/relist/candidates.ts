import type { Millis } from "../watch/ProjectionWatch.js"
import type { RelistRun } from "./RelistRun.js"
import {
  MAX_SWEEP_APPLY_ATTEMPTS,
  type SweepCandidate,
  type SweepCandidateStatus,
  type SweepOutcome
} from "./SweepCandidate.js"
import { bump, changed, type Decided, unchanged } from "../versioned.js"

/** What a candidate transition decided: an outcome, and the row to write at the version read. */
export type SweepCandidateDecision<O extends string> = Decided<SweepCandidate, O>

/** Whether a run still stands behind its candidates: `current` while complete, else `stale-run`. */
export const candidateRunStanding = (run: RelistRun): "current" | "stale-run" =>
  run.state === "complete" ? "current" : "stale-run"

/** True when `row` is the candidate `run` derived (and not an older run's given-up case). */
export const belongsToRun = (row: SweepCandidate | undefined, run: RelistRun): row is SweepCandidate =>
  row !== undefined && row.runID === run.runID

/** What `recordSweepOutcome` did. */
export type SweepOutcomeResult =
  | "recorded"
  /** Given up: nothing is decided for it until a person re-arms it. */
  | "given-up"
  /** Already applied or kept. */
  | "settled"
  /** `delete_local` for an entity the provider still has (refused as an error by the store). */
  | "not-allowed"

const settledStatuses: ReadonlyArray<SweepCandidateStatus> = ["applied", "kept"]

/** Records the decision about an open or decided candidate: `keep` settles it, `delete_local` is for deletions only. */
export const decideSweepOutcome = (
  row: SweepCandidate,
  outcome: SweepOutcome,
  now: Millis
): SweepCandidateDecision<SweepOutcomeResult> => {
  if (row.status === "given_up") return unchanged("given-up")
  if (settledStatuses.includes(row.status)) return unchanged("settled")
  if (outcome === "delete_local" && row.kind !== "deleted") return unchanged("not-allowed")
  if (row.status === "decided" && row.outcome === outcome) return unchanged("recorded")
  return changed("recorded", bump(row, now, { outcome, status: outcome === "keep" ? "kept" : "decided" }))
}

/** What `markSweepCandidateApplied` did. */
export type SweepApplyOutcome = "applied" | "undecided" | "kept" | "given-up"

/** What an apply (or its failure) of a candidate that is not decided answers: nothing is written. */
const NOT_DECIDED = {
  given_up: "given-up",
  open: "undecided",
  kept: "kept",
  applied: "applied"
} as const satisfies Record<Exclude<SweepCandidateStatus, "decided">, SweepApplyOutcome & SweepApplyFailureOutcome>

/** Marks a decided candidate applied (the applier's work runs exactly when this writes); any other status answers without a write. */
export const decideSweepApplied = (row: SweepCandidate, now: Millis): SweepCandidateDecision<SweepApplyOutcome> =>
  row.status === "decided" ? changed("applied", bump(row, now, { status: "applied" })) : unchanged(NOT_DECIDED[row.status])

/** A failed apply, as its runner reports it. */
export interface SweepApplyFailure {
  /** A short, stable kind (e.g. `network`, `not_found`, `permission`). */
  readonly kind: string
  /** What went wrong, in the runner's words; stored as the candidate's `lastErrorMessage`. */
  readonly message: string
}

/** What `recordSweepApplyFailure` did. */
export type SweepApplyFailureOutcome =
  /** Counted; the candidate stays decided and may be applied again. */
  | "retry"
  /** This failure spent the last attempt, or it was given up already. */
  | "given-up"
  | "applied"
  | "kept"
  | "undecided"

/** Counts a failed apply of a decided candidate with its kind and message; the one that reaches `MAX_SWEEP_APPLY_ATTEMPTS` gives it up. */
export const decideSweepApplyFailure = (
  row: SweepCandidate,
  failure: SweepApplyFailure,
  now: Millis
): SweepCandidateDecision<SweepApplyFailureOutcome> => {
  if (row.status !== "decided") return unchanged(NOT_DECIDED[row.status])
  const attempts = Math.min(row.applyAttempts + 1, MAX_SWEEP_APPLY_ATTEMPTS)
  const givenUp = attempts >= MAX_SWEEP_APPLY_ATTEMPTS
  return changed(
    givenUp ? "given-up" : "retry",
    bump(row, now, {
      applyAttempts: attempts,
      lastErrorKind: failure.kind,
      lastErrorMessage: failure.message,
      status: givenUp ? "given_up" : "decided"
    })
  )
}

/** What `rearmSweepCandidate` did. */
export type SweepRearmOutcome = "rearmed" | "not-given-up"

/** A person re-arms a given-up candidate: open, no attempts, no decision (the last error kept); any other is left alone. */
export const decideSweepRearm = (row: SweepCandidate, now: Millis): SweepCandidateDecision<SweepRearmOutcome> =>
  row.status === "given_up"
    ? changed("rearmed", bump(row, now, { status: "open", outcome: null, applyAttempts: 0 }))
    : unchanged("not-given-up")
