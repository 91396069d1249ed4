/** A row the store writes under optimistic concurrency: each write carries the next version. */
export interface Versioned {
  readonly version: number
  readonly updatedAt: number
}

/**
 * `row` with `patch` applied, its version bumped and `updatedAt` set to
 * `now`: the next row a decision writes, to land only if the stored version
 * is still the one it read.
 */
export const bump = <R extends Versioned>(row: R, now: number, patch: Partial<R>): R => ({
  ...row,
  ...patch,
  version: row.version + 1,
  updatedAt: now
})
