import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import type { FinalizeOperationInput } from "./finalize.js"
import { released } from "./decision.js"
import { isInDoubt } from "./doubt.js"
import { bump } from "../versioned.js"

/**
 * What a person (or a lookup at the provider) found out about an operation
 * whose outcome was unknown:
 *
 * - `committed`: the provider holds the write; `sourceID` is its entity,
 *   `documentID` the local document it projects into. The watch is armed as
 *   a finalize arms it, first verification due at `watchDueAt`.
 * - `dead`: the provider does not hold it and it will not be sent again.
 */
export type SettleOperationInput =
  | ({ readonly outcome: "committed" } & Omit<FinalizeOperationInput, "leaseToken">)
  | { readonly outcome: "dead" }

/** The columns of an operation whose outcome became known: no request of it is in doubt any more. */
const doubtCleared = { sendMarker: null, inDoubtSince: null } as const satisfies Partial<ConnectorOperation>

/** A settle decision: the row to write, or why there is none. */
export type SettleDecision =
  | { readonly settled: true; readonly next: ConnectorOperation }
  | { readonly settled: false; readonly reason: string }

/**
 * True when an operation's outcome is for a person to settle: it is
 * `reconcile_only`, or it went `dead` while a request of it was in doubt
 * (such an operation reads as unconfirmed, never as failed).
 */
export const awaitsSettlement = (row: ConnectorOperation): boolean =>
  row.state === "reconcile_only" || (row.state === "dead" && isInDoubt(row))

/**
 * Decides a settle. Only an operation awaiting settlement (see
 * `awaitsSettlement`) is settled; its in-doubt fact is cleared, since the
 * outcome is now known. `committed` records the provider entity as a
 * finalize does (the watch is armed by the caller in the same
 * transaction); `dead` ends it for good. Anything else is refused with the
 * reason, and nothing changes.
 */
export const decideSettle = (row: ConnectorOperation, input: SettleOperationInput, now: Millis): SettleDecision => {
  if (!awaitsSettlement(row)) {
    return {
      settled: false,
      reason: row.state === "attempted"
        ? "it is still attempted: a runner drives it, there is no outcome to settle"
        : `it is ${row.state} and its outcome is known; only reconcile_only operations (or dead ones still in doubt) are settled`
    }
  }
  const common = { ...released, ...doubtCleared, nextAttemptAt: null, deferReason: null }
  if (input.outcome === "dead") return { settled: true, next: bump(row, now, { ...common, state: "dead" }) }
  return {
    settled: true,
    next: bump(row, now, {
      ...common,
      state: "committed",
      sourceID: input.sourceID,
      documentID: input.documentID,
      providerEtag: input.providerEtag ?? null,
      resultEntity: input.resultEntity ?? null
    })
  }
}

/**
 * What a settle did: the settled operation, and for `committed` the armed
 * watch and the watches it superseded (for a delete: no watch, and the
 * deleted entity's watch it retired in `superseded`).
 */
export interface SettleResult {
  /** The operation as settled. */
  readonly operation: ConnectorOperation
  /** The watch a committed create or update armed; null for `dead` and for a delete. */
  readonly watch: ProjectionWatch | null
  /** The watches deleted: superseded by the armed one, or the deleted entity's watch a delete retired. */
  readonly superseded: ReadonlyArray<WatchIdentity>
}
