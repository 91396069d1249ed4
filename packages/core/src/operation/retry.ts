import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import { released } from "./decision.js"
import { foldedDoubt, isInDoubt } from "./doubt.js"
import { safeReissue } from "./reissue.js"
import { bump } from "../versioned.js"

/** A retry decision: the row to write, or why the retry is refused. */
export type RetryDecision =
  | { readonly retried: true; readonly next: ConnectorOperation }
  | { readonly retried: false; readonly reason: string }

/**
 * Decides an operator's retry of a `dead` operation. A retry is safe, and
 * taken, when no request of it can be applied twice by it:
 *
 * - no request of it is in doubt: it becomes attempted, due now, with a
 *   fresh attempt budget;
 * - a request is in doubt but its stored reissue intent is a safe one
 *   (conditional update, deterministic create): the same, and it stays in
 *   doubt (the old run's marker folded into `inDoubtSince`), so the next
 *   claim hands the runner that intent instead of a blind send.
 *
 * Anything else is refused with the reason and nothing changes: a state
 * other than `dead`, or a request in doubt without a safe intent (look it up
 * at the provider and settle it instead).
 */
export const decideRetry = (row: ConnectorOperation, now: Millis): RetryDecision => {
  if (row.state !== "dead") {
    return { retried: false, reason: `it is ${row.state}; only dead operations are retried` }
  }
  if (isInDoubt(row) && safeReissue(row.reissueIntent) === undefined) {
    return {
      retried: false,
      reason: "a request of it may have landed and its reissue intent allows no safe re-send; " +
        "look the entity up at the provider and settle the operation instead"
    }
  }
  return {
    retried: true,
    // The old run's marker is folded into the durable doubt, as a takeover
    // folds it: the retried operation stays in doubt until an outcome is known.
    next: bump(row, now, {
      ...released,
      state: "attempted",
      attempts: 0,
      nextAttemptAt: now,
      deferReason: null,
      sendMarker: null,
      inDoubtSince: foldedDoubt(row, now)
    })
  }
}
