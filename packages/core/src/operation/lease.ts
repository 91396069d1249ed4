import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import { changed, type OperationDecision, unchanged } from "./decision.js"
import { bump } from "../versioned.js"

/** The drive lease a runner holds: its fencing token and when it lapses. */
export interface Lease {
  /** What every later call of this run passes as `leaseToken`. */
  readonly token: string
  /** When the lease ends, on the store's clock; renew it before then for a long call. */
  readonly expiresAt: Millis
}

/** The answer to a runner write whose lease is no longer the row's; nothing was written. */
export interface LeaseLost {
  /** Another runner holds the operation, or it ended otherwise: stop driving it. */
  readonly outcome: "lease-lost"
  /** The row as it is now, or null when there is none. */
  readonly operation: ConnectorOperation | null
}

/** The lease-lost answer for `row`. */
export const leaseLost = (row: ConnectorOperation | undefined): LeaseLost => ({
  outcome: "lease-lost",
  operation: row ?? null
})

/** True while a runner's lease on an attempted operation is live (strictly before its expiry, when the operation falls due). */
export const holdsLiveLease = (row: ConnectorOperation, now: Millis): boolean =>
  row.state === "attempted" && row.leaseToken !== null && row.leaseExpiresAt !== null && row.leaseExpiresAt > now

/** True when `token` is the lease of an attempted operation: this, not the clock, fences a runner's writes. */
export const isLeaseHolder = (row: ConnectorOperation, token: string): boolean =>
  row.state === "attempted" && row.leaseToken === token

/** The lease of a row a runner was just granted. */
export const leaseOf = (row: ConnectorOperation): Lease => ({ token: row.leaseToken!, expiresAt: row.leaseExpiresAt! })

/** The columns of a lease taken at `now` for `durationMs`; the next attempt falls due when it lapses. */
export const leaseColumns = (token: string, now: Millis, durationMs: number) => ({
  leaseToken: token,
  leaseExpiresAt: now + durationMs,
  nextAttemptAt: now + durationMs
})

/** What `renewOperationLease` answers. */
export type RenewResult = { readonly outcome: "renewed"; readonly operation: ConnectorOperation; readonly lease: Lease } | LeaseLost

/** Decides a heartbeat: the holder's lease (and the due time with it) moves to `now + durationMs`. */
export const decideRenew = (
  row: ConnectorOperation | undefined,
  token: string,
  durationMs: number,
  now: Millis
): OperationDecision<RenewResult> =>
  row !== undefined && isLeaseHolder(row, token)
    ? changed(bump(row, now, leaseColumns(token, now, durationMs)), (next) => ({
      outcome: "renewed",
      operation: next,
      lease: leaseOf(next)
    }))
    : unchanged(leaseLost(row))
