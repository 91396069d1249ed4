import type { Millis } from "../watch/ProjectionWatch.js"
import { isCurrentRelistRun, isRelistRunListing, type RelistRun, type RelistScope, relistScopeOf } from "./RelistRun.js"
import { bump, changed, type Decided, unchanged } from "../versioned.js"

/** What a run transition decided: an outcome, and the run to write at the version read. */
export type RelistRunDecision<O extends string> = Decided<RelistRun, O>


/** What starting a run writes: the new run, and the scope's previous current run marked superseded. */
export interface RelistStartDecision {
  /** The new run, in state `started`. */
  readonly run: RelistRun
  /** The scope's previous current run, now `superseded`; `undefined` when there was none. */
  readonly superseded: RelistRun | undefined
}

/** Starts a run of `scope` with id `runID`, superseding the current one (its runner commits nothing more, it yields no candidates). */
export const decideRelistStart = (
  current: RelistRun | undefined,
  scope: RelistScope,
  runID: string,
  now: Millis
): RelistStartDecision => ({
  run: {
    ...relistScopeOf(scope),
    runID,
    state: "started",
    cursor: null,
    pagesCommitted: 0,
    receiptCount: null,
    trackedCount: null,
    deletionCount: null,
    divergenceCount: null,
    version: 0,
    startedAt: now,
    updatedAt: now,
    completedAt: null,
    endedAt: null
  },
  superseded: current !== undefined && isCurrentRelistRun(current)
    ? bump(current, now, { state: "superseded", endedAt: now })
    : undefined
})

/** What `commitSweepCheckpoint` did. */
export type SweepCheckpointOutcome =
  /** The page's receipts and cursor are stored. */
  | "committed"
  /** The last page is stored and the run is complete: its candidates are derived. */
  | "completed"
  /** The run is no longer listing (superseded, abandoned or already complete): nothing stored. */
  | "stale-run"
  /** Another runner already committed this page (or the caller skipped one): nothing stored. */
  | "stale-page"

/** One page's checkpoint, as its runner commits it. */
export interface SweepCheckpointInput {
  /** The page's number: 1 for the first page, then `pagesCommitted + 1`. */
  readonly page: number
  /** The provider's cursor to list the next page from. */
  readonly cursor: string | null
  /** True when this page is the end of the listing. */
  readonly complete?: boolean | undefined
}

/** Decides a page commit: a listing run takes only its next page; the page that ends the listing completes the run. */
export const decideSweepCheckpoint = (
  run: RelistRun,
  input: SweepCheckpointInput,
  now: Millis
): RelistRunDecision<SweepCheckpointOutcome> => {
  if (!isRelistRunListing(run)) return unchanged("stale-run")
  if (input.page !== run.pagesCommitted + 1) return unchanged("stale-page")
  return input.complete === true
    ? changed("completed", bump(run, now, { state: "complete", cursor: null, pagesCommitted: input.page, completedAt: now }))
    : changed("committed", bump(run, now, { state: "listing", cursor: input.cursor, pagesCommitted: input.page }))
}

/** What `recordRelistReceipt` did. */
export type RelistReceiptOutcome = "recorded" | "stale-run"

/** Receipts go only into a run that is still listing; any other run is stale for them. */
export const decideRelistReceipts = (run: RelistRun): RelistReceiptOutcome => isRelistRunListing(run) ? "recorded" : "stale-run"

/** The counts a completed run derived, stored on it. */
export interface SweepCandidateCounts {
  /** Distinct provider entities the run receipted. */
  readonly receipts: number
  /** Watches of the scope when the run completed. */
  readonly tracked: number
  /** Deletion candidates derived. */
  readonly deletions: number
  /** Divergence candidates derived. */
  readonly divergences: number
}

/** The completed run with what its derivation counted (same version: part of the same write). */
export const withCandidateCounts = (run: RelistRun, counts: SweepCandidateCounts): RelistRun => ({
  ...run,
  receiptCount: counts.receipts,
  trackedCount: counts.tracked,
  deletionCount: counts.deletions,
  divergenceCount: counts.divergences
})

/** What `abandonRelistRun` did. */
export type RelistAbandonOutcome = "abandoned" | "already-ended"

/** Abandons a current run: no more pages, no candidates; an ended run stays as it is. */
export const decideRelistAbandon = (run: RelistRun, now: Millis): RelistRunDecision<RelistAbandonOutcome> =>
  isCurrentRelistRun(run)
    ? changed("abandoned", bump(run, now, { state: "abandoned", endedAt: now }))
    : unchanged("already-ended")
