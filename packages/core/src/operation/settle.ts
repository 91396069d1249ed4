import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import type { FinalizeOperationInput } from "./finalize.js"
import { released } from "./decision.js"
import { isInDoubt } from "./doubt.js"
import { bump } from "../versioned.js"

/**
 * What a person or a lookup found out about an operation whose outcome was unknown: `committed` (the provider holds it;
 * its watch is armed as a finalize arms it) or `dead` (it will not be sent again).
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

/** True when an operation's outcome is for a person to settle: `reconcile_only`, or `dead` while in doubt. */
export const awaitsSettlement = (row: ConnectorOperation): boolean =>
  row.state === "reconcile_only" || (row.state === "dead" && isInDoubt(row))

/**
 * Decides a settle of an operation awaiting it (clearing its doubt): `committed` records the entity as a finalize does,
 * `dead` ends it; anything else is refused with the reason.
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

/** What a settle did: the operation, and for `committed` the armed watch and the watches superseded (a delete's retired one). */
export interface SettleResult {
  /** The operation as settled. */
  readonly operation: ConnectorOperation
  /** The watch a committed create or update armed; null for `dead` and for a delete. */
  readonly watch: ProjectionWatch | null
  /** The watches deleted: superseded by the armed one, or the deleted entity's watch a delete retired. */
  readonly superseded: ReadonlyArray<WatchIdentity>
}
