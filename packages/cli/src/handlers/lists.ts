import { Clock, Console, Effect, Option } from "effect"
import { CliError, type DatabaseOptions, withStoreReadOnly } from "../store.js"
import { operationJson, operationsTable, output, pageText, quietly, watchJson, watchesTable } from "../views.js"

/** The options of a command that prints a page: `--json`, `--limit`, `--cursor`. */
export interface PageOptions extends DatabaseOptions {
  readonly json: boolean
  readonly limit: number
  readonly cursor: Option.Option<string>
}

/** `--limit` as the store takes it, or a clear error naming the flag. */
export const checkedLimit = (limit: number) =>
  Number.isSafeInteger(limit) && limit >= 1 && limit <= 500
    ? Effect.succeed(limit)
    : Effect.fail(new CliError({ message: `--limit must be between 1 and 500, got ${limit}` }))

/** The footer of a page: how to get the next one. */
export const nextPageHint = (cursor: string | null) => cursor === null ? Effect.void : Console.log(`\nnext page: --cursor ${cursor}`)

const defined = <A>(option: Option.Option<A>): A | undefined => Option.getOrUndefined(option)

/** `operations`: every operation that passes the filters, newest first, a page at a time. */
export const operations = (options: PageOptions & {
  readonly owner: Option.Option<string>
  readonly connector: Option.Option<string>
  readonly caller: Option.Option<string>
  readonly state: ReadonlyArray<"attempted" | "committed" | "dead" | "reconcile_only">
  readonly document: Option.Option<string>
  readonly due: boolean
  readonly inDoubt: boolean
}) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const now = yield* Clock.currentTimeMillis
    // A row that cannot be decoded is left out of the page and marked CORRUPT after it.
    const page = yield* withStoreReadOnly(options, (store) =>
      quietly(store.listOperations({
        ownerDID: defined(options.owner),
        connectorName: defined(options.connector),
        callerDID: defined(options.caller),
        states: options.state.length === 0 ? undefined : options.state,
        documentID: defined(options.document),
        dueBy: options.due ? now : undefined,
        inDoubt: options.inDoubt ? true : undefined,
        limit,
        cursor: defined(options.cursor)
      })))
    yield* output(
      options.json,
      () => ({ operations: page.items.map(operationJson), nextCursor: page.nextCursor, corrupt: page.corrupt }),
      () => pageText(page.items, page.corrupt, "no operations match", (items) => operationsTable(items, now))
    )
    if (!options.json) yield* nextPageHint(page.nextCursor)
  })

/** `watches`: every watch that passes the filters, by identity, a page at a time. */
export const watches = (options: PageOptions & {
  readonly owner: Option.Option<string>
  readonly connector: Option.Option<string>
  readonly status: ReadonlyArray<"pending_verification" | "verified" | "repair_failed">
  readonly document: Option.Option<string>
  readonly due: boolean
}) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const now = yield* Clock.currentTimeMillis
    const page = yield* withStoreReadOnly(options, (store) =>
      quietly(store.listWatches({
        ownerDID: defined(options.owner),
        connectorName: defined(options.connector),
        statuses: options.status.length === 0 ? undefined : options.status,
        documentID: defined(options.document),
        dueBy: options.due ? now : undefined,
        limit,
        cursor: defined(options.cursor)
      })))
    yield* output(
      options.json,
      () => ({ watches: page.items.map(watchJson), nextCursor: page.nextCursor, corrupt: page.corrupt }),
      () => pageText(page.items, page.corrupt, "no watches match", (items) => watchesTable(items, now))
    )
    if (!options.json) yield* nextPageHint(page.nextCursor)
  })
