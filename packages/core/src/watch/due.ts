import { compareWatchIdentities } from "../operator/queries.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "./ProjectionWatch.js"
import { hasLiveClaim, isScheduleDue } from "./transitions.js"
import { keysetPage } from "../operation/due.js"
import type { FairTable } from "../due/fair.js"

/** Where a watch due by schedule stands in the due order: its next attempt and its identity. */
export interface DueWatchPosition extends WatchIdentity {
  /** When the watch's next attempt is due (epoch ms). */
  readonly nextAttemptAt: Millis
}

/** The position of a watch due by schedule (its next attempt is set). */
export const dueWatchPositionOf = (row: ProjectionWatch): DueWatchPosition => ({
  nextAttemptAt: row.nextAttemptAt!,
  ownerDID: row.ownerDID,
  connectorName: row.connectorName,
  model: row.model,
  accountKey: row.accountKey,
  sourceID: row.sourceID
})

/**
 * The due order of watches due by schedule (each with its next attempt
 * set): by next attempt, then by identity in code-point (byte) order, as
 * every adapter reads them.
 */
export const compareDueWatches = (a: DueWatchPosition | ProjectionWatch, b: DueWatchPosition | ProjectionWatch): number =>
  a.nextAttemptAt! - b.nextAttemptAt! || compareWatchIdentities(a, b)

/**
 * One page of the watches due by schedule at `now` (`isScheduleDue`), as a
 * repository without a query language reads it: in the due order, strictly
 * after `after` (from the first when absent), at most `limit`.
 */
export const scheduleDuePage = (
  rows: Iterable<ProjectionWatch>,
  now: Millis,
  after: DueWatchPosition | undefined,
  limit: number
): ReadonlyArray<ProjectionWatch> =>
  keysetPage(rows, (row) => isScheduleDue(row, now), compareDueWatches, after, limit)

/**
 * True when a batch may claim the watch at `now`: pending verification, due
 * by schedule, and under no live claim (what `decideClaim` accepts for the
 * row's own generation).
 */
export const isClaimableWatch = (row: ProjectionWatch, now: Millis): boolean =>
  row.verificationStatus === "pending_verification" && row.nextAttemptAt !== null && row.nextAttemptAt <= now &&
  !hasLiveClaim(row, now)

/**
 * The watch table as `fairPage` reads it for a batch at `now`: the pending
 * watches (the owner index's rows), an owner with due work one with a
 * watch a batch may claim (`isClaimableWatch`), the same rows taken.
 */
export const fairWatchTable = (rows: Iterable<ProjectionWatch>, now: Millis): FairTable<ProjectionWatch, DueWatchPosition> => ({
  rows: Array.from(rows).filter((row) => row.verificationStatus === "pending_verification"),
  ownerOf: (row) => row.ownerDID,
  isDue: (row) => isClaimableWatch(row, now),
  isTaken: (row) => isClaimableWatch(row, now),
  positionOf: dueWatchPositionOf,
  compare: compareDueWatches
})
