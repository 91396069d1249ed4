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
