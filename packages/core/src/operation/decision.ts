import type { ConnectorOperation } from "./ConnectorOperation.js"

/** What an operation transition decided: the caller's result, and the row to write at the version read. */
export interface OperationDecision<R> {
  /** What the method answers. */
  readonly result: R
  /** The row to write (`version + 1`), or undefined when nothing changes. */
  readonly next: ConnectorOperation | undefined
}

/** A decision that writes nothing. */
export const unchanged = <R>(result: R): OperationDecision<R> => ({ result, next: undefined })

/** A decision that writes `next`, whose result is computed from it. */
export const changed = <R>(next: ConnectorOperation, result: (next: ConnectorOperation) => R): OperationDecision<R> => ({
  result: result(next),
  next
})


/** The lease columns of a row no runner drives. */
export const released = { leaseToken: null, leaseExpiresAt: null } as const
