import { Effect } from "effect"
import { InvalidInput } from "../errors.js"
import { DEFAULT_TRACKED_PAGE } from "../operation/checks.js"
import { collectCorruptRows, type CorruptRowReport } from "../ports/CorruptRows.js"

/** One page of an operator list; `nextCursor` is null on the last page. */
export interface OperatorPage<A> {
  readonly items: ReadonlyArray<A>
  readonly nextCursor: string | null
  /** The rows of this page left out because they cannot be decoded (reported again with the next page if after it). */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
}

/** The refusal of a `field` that holds no cursor this store returned. */
export const badCursor = (method: string, field = "filter.cursor") =>
  new InvalidInput({ method, field, reason: "is not a cursor this store returned" })

/** Decodes the cursor of a filter, or fails naming it. */
export const cursorOf = <P>(method: string, cursor: string | undefined, decode: (c: string) => P | undefined) =>
  cursor === undefined
    ? Effect.succeed(undefined)
    : Effect.flatMap(Effect.sync(() => decode(cursor)), (after) => after === undefined ? Effect.fail(badCursor(method)) : Effect.succeed(after))

/** A page of at most `limit` (default `DEFAULT_TRACKED_PAGE`) rows, reading one more to learn whether a next page exists. */
export const paged = <A, E>(
  limit: number | undefined,
  read: (limit: number) => Effect.Effect<ReadonlyArray<A>, E>,
  cursorAfter: (last: A) => string
): Effect.Effect<OperatorPage<A>, E> => {
  const size = limit ?? DEFAULT_TRACKED_PAGE
  return Effect.map(collectCorruptRows(read(size + 1)), ([rows, corrupt]) => {
    const items = rows.slice(0, size)
    const last = items[items.length - 1]
    // The rows left out count towards the size + 1 read: more follow the page's last item.
    return { items, nextCursor: rows.length + corrupt.length > size && last !== undefined ? cursorAfter(last) : null, corrupt }
  })
}
