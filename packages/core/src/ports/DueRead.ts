import type { FairPosition } from "../due/fair.js"

/**
 * One page of a due read, as the adapter read it (see
 * `OperationRepository.listDuePage`): `P` is where a row stands in the due
 * order.
 */
export interface DueRead<A, P> {
  /** The rows of the page that decode, in the due order (each row that does not is reported by `reportCorruptRows`). */
  readonly rows: ReadonlyArray<A>
  /** How many rows the page read, those that do not decode included. */
  readonly read: number
  /**
   * The position of the page's last row read, a row that does not decode
   * included, so the next page starts after it; undefined when the page
   * read no row whose position could be read.
   */
  readonly last: P | undefined
}

/**
 * One page of a batch's owner-fair locked read (see
 * `OperationRepository.lockDuePage` and `WatchRepository.lockClaimablePage`;
 * `fairPage` is the reference).
 */
export interface FairDueRead<A, P> {
  /** The rows of the page that decode, in the page's order (each row that does not is reported by `reportCorruptRows`). */
  readonly rows: ReadonlyArray<A>
  /** How many rows the page read, those that do not decode included. */
  readonly read: number
  /** The position a next page of the same batch starts from: each owner read is read on after its last row read. */
  readonly last: FairPosition<P>
  /** The last owner the page's owner scan visited, undefined when it visited none: the next batch starts after it. */
  readonly scanned: string | undefined
  /** True when an owner gave the page every row the page allowed it: a next page may find more. */
  readonly more: boolean
}
