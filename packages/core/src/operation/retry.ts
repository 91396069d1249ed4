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
 * Decides an operator's retry of a `dead` operation: attempted again, due now, with a fresh budget, when no request of
 * it is in doubt or its reissue intent is safe (it then stays in doubt); anything else is refused with the reason.
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
