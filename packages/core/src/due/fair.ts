import { compareCodePoints } from "../operation/retention.js"

/**
 * How many owners a batch's page visits at most for each row of its
 * `limit`: the owner scan stops at `limit` owners with due work, or after
 * `OWNERS_VISITED_PER_ROW × limit` owners in all (owners whose rows are all
 * leased, claimed or scheduled later cost one index probe each).
 */
export const OWNERS_VISITED_PER_ROW = 4

/**
 * Where a batch's owner-fair read stands: the rotation's start and, for
 * each owner an earlier page of the same batch read, its last row read.
 */
export interface FairPosition<P> {
  /**
   * The owners after this one (in byte order) are visited first, then from
   * the first owner around to it; `""` starts from the first owner.
   */
  readonly from: string
  /** Each owner's last row read by the batch's earlier pages: a later page reads the owner's rows after it. */
  readonly owners: ReadonlyArray<readonly [ownerDID: string, position: P]>
  /** The owners whose rows an earlier page read to the end: a later page's scan counts them as having no due work. */
  readonly done: ReadonlyArray<string>
}

/** The first page's position of a batch whose rotation starts after `cursor` (the last owner a batch visited). */
export const fairStart = <P>(cursor: string | undefined): FairPosition<P> => ({ from: cursor ?? "", owners: [], done: [] })

/**
 * `position` with each owner's position replaced by its last of `read`
 * (rows as read, in the page's order; `undefined` for a row whose owner or
 * position cannot be read).
 */
export const advanceFairPosition = <P>(
  position: FairPosition<P>,
  read: ReadonlyArray<readonly [ownerDID: string, position: P] | undefined>,
  done: ReadonlyArray<string>
): FairPosition<P> => {
  const owners = new Map(position.owners)
  for (const entry of read) if (entry !== undefined) owners.set(entry[0], entry[1])
  return { from: position.from, owners: Array.from(owners), done: Array.from(new Set([...position.done, ...done])) }
}

/** One page of an owner-fair read, as the reference computes it. */
export interface FairPage<A> {
  /** The page's rows, every owner's first before any owner's second, owners in the scan's order, each owner's in the due order. */
  readonly rows: ReadonlyArray<A>
  /** The last owner the scan visited (the next batch starts after it), undefined when it visited none. */
  readonly scanned: string | undefined
  /** True when an owner gave the page every row the page allowed it, so a next page may find more. */
  readonly more: boolean
  /** The owners with due work that gave fewer rows than the page allowed them: the batch has read them to the end. */
  readonly done: ReadonlyArray<string>
}

/** What the reference needs to know about a table's rows. */
export interface FairTable<A, P> {
  /** Every row of the owner index (attempted operations, pending watches). */
  readonly rows: Iterable<A>
  /** The row's owner (its `ownerDID`). */
  readonly ownerOf: (row: A) => string
  /** Whether the row makes its owner one with due work (the scan's check, which reads no position). */
  readonly isDue: (row: A) => boolean
  /** Whether the page may take the row (due, and under no scope the page passes over). */
  readonly isTaken: (row: A) => boolean
  /** The row's position in the due order. */
  readonly positionOf: (row: A) => P
  /** The due order. */
  readonly compare: (a: P, b: P) => number
}

/**
 * One page of the rows a batch takes, fair between owners, as a repository
 * without a query language reads it (the SQL adapter's statement reads the
 * same page through an index led by the owner):
 *
 * 1. the owner scan: the owners with rows in the table's index, in byte
 *    order from after `at.from`, around to it, until `limit` owners with
 *    due work (not in `at.done`) are found or `OWNERS_VISITED_PER_ROW ×
 *    limit` visited;
 * 2. each owner with due work gives its first `ceil(limit / k)` rows the
 *    page may take after its position in `at` (k: the owners with due
 *    work found), in the due order;
 * 3. the rows ordered by their rank in their owner's rows, then by the
 *    owner's place in the scan, the first `limit` kept.
 *
 * A single owner's page is its first `limit` rows in the due order.
 */
export const fairPage = <A, P>(table: FairTable<A, P>, at: FairPosition<P>, limit: number): FairPage<A> => {
  const byOwner = new Map<string, Array<A>>()
  for (const row of table.rows) {
    const owner = table.ownerOf(row)
    const rows = byOwner.get(owner)
    if (rows === undefined) byOwner.set(owner, [row])
    else rows.push(row)
  }
  const owners = Array.from(byOwner.keys()).sort(compareCodePoints)
  const rotated = [
    ...owners.filter((owner) => compareCodePoints(owner, at.from) > 0),
    ...owners.filter((owner) => compareCodePoints(owner, at.from) <= 0)
  ]
  const done = new Set(at.done)
  const visited: Array<string> = []
  const dueOwners: Array<string> = []
  for (const owner of rotated) {
    if (visited.length >= OWNERS_VISITED_PER_ROW * limit || dueOwners.length >= limit) break
    visited.push(owner)
    if (!done.has(owner) && byOwner.get(owner)!.some(table.isDue)) dueOwners.push(owner)
  }
  const cap = Math.ceil(limit / Math.max(dueOwners.length, 1))
  const positions = new Map(at.owners)
  const ranked: Array<{ readonly row: A; readonly rank: number; readonly owner: number }> = []
  let more = false
  const finished: Array<string> = []
  dueOwners.forEach((owner, place) => {
    const after = positions.get(owner)
    const rows = byOwner.get(owner)!
      .filter((row) => table.isTaken(row) && (after === undefined || table.compare(table.positionOf(row), after) > 0))
      .sort((a, b) => table.compare(table.positionOf(a), table.positionOf(b)))
      .slice(0, cap)
    if (rows.length === cap) more = true
    else finished.push(owner)
    rows.forEach((row, rank) => ranked.push({ row, rank, owner: place }))
  })
  ranked.sort((a, b) => a.rank - b.rank || a.owner - b.owner)
  return { rows: ranked.slice(0, limit).map(({ row }) => row), scanned: visited.at(-1), more, done: finished }
}
