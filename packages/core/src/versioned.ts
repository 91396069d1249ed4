/** A row the store writes under optimistic concurrency: each write carries the next version. */
export interface Versioned {
  readonly version: number
  readonly updatedAt: number
}

/** `row` with `patch` applied, its version bumped and `updatedAt` set to `now`: the next row a decision writes. */
export const bump = <R extends Versioned>(row: R, now: number, patch: Partial<R>): R => ({
  ...row,
  ...patch,
  version: row.version + 1,
  updatedAt: now
})

/** What a transition decided about one row: the outcome, and the row to write (written only at the version read). */
export interface Decided<Row, O> {
  /** What the caller is told happened. */
  readonly outcome: O
  /** The row to write (`version + 1`), or undefined when nothing changes. */
  readonly next: Row | undefined
}

/** A decision that writes nothing. */
export const unchanged = <O extends string>(outcome: O): Decided<never, O> => ({ outcome, next: undefined })

/** A decision that writes `next`. */
export const changed = <Row, O extends string>(outcome: O, next: Row): Decided<Row, O> => ({ outcome, next })
