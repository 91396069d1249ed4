import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"

/**
 * What a noticed failover (or a restored backup) puts in doubt: the database now answering may have forgotten writes it
 * acknowledged before `noticedAt`, so a claim cannot tell "never sent" from "sent, and the row that said so was lost".
 *
 * - Until `until`, every claim is handed out in doubt: of a key the store has never seen (its row may be the lost one)
 *   and of a key it knows (its mark or commit may be the lost write).
 * - After it, a row last written in `[lookbackFrom, noticedAt)`, the span whose later writes may be the ones lost, and not
 *   written since, is still claimed in doubt: once claimed after the notice, its row is the promoted server's own.
 */
export interface FailoverDoubt {
  /** When the store noticed the server it talks to is not the one that acknowledged its earlier writes. */
  readonly noticedAt: Millis
  /** When the window closes (`noticedAt` plus the store's `failoverDoubtMs`, or earlier when an operator ended it). */
  readonly until: Millis
  /** The oldest last write of a row still suspect after the window (`noticedAt` minus the window; `noticedAt` once ended). */
  readonly lookbackFrom: Millis
}

/** True when a claim at `now` of `row` (absent for a key the store has never seen) must be handed out in doubt because of `doubt`. */
export const failoverSuspects = (row: ConnectorOperation | undefined, doubt: FailoverDoubt | undefined, now: Millis): boolean => {
  if (doubt === undefined) return false
  // Before `until` on this clock, whichever process noticed it: a clock behind the noticer's is still inside.
  if (now < doubt.until) return true
  return row !== undefined && row.updatedAt >= doubt.lookbackFrom && row.updatedAt < doubt.noticedAt
}

/**
 * True when the claim decided at `now` for `row` (absent for a new key) went out in doubt only because of `doubt`: a
 * claim the failover cost a reissue (or a person, `reconcile_only`), as `ServerHistory.countDoubtful` counts them.
 */
export const doubtedByFailover = (
  row: ConnectorOperation | undefined,
  outcome: "claimed" | "busy" | "scheduled" | "finished",
  doubt: FailoverDoubt | undefined,
  now: Millis
): boolean =>
  failoverSuspects(row, doubt, now) && (outcome === "claimed" || (outcome === "finished" && (row === undefined || row.state === "attempted"))) &&
  (row === undefined || (row.inDoubtSince === null && row.sendMarker === null))
