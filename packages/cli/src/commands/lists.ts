import { Command, Options } from "@effect/cli"
import { Clock, Console, Effect, Option } from "effect"
import { databaseOptions, json, paging } from "../options.js"
import { CliError, withStoreReadOnly } from "../store.js"
import { operationJson, operationsTable, output, pageText, quietly, watchJson, watchesTable } from "../views.js"

const text = (name: string, description: string) => Options.text(name).pipe(Options.optional, Options.withDescription(description))

/** `--limit` as the store takes it, or a clear error naming the flag. */
export const checkedLimit = (limit: number) =>
  Number.isSafeInteger(limit) && limit >= 1 && limit <= 500
    ? Effect.succeed(limit)
    : Effect.fail(new CliError({ message: `--limit must be between 1 and 500, got ${limit}` }))

/** The footer of a page: how to get the next one. */
export const nextPageHint = (cursor: string | null) => cursor === null ? Effect.void : Console.log(`\nnext page: --cursor ${cursor}`)

const defined = <A>(option: Option.Option<A>): A | undefined => Option.getOrUndefined(option)

/** `operations`: every operation that passes the filters, newest first, a page at a time. */
export const operationsCommand = Command.make("operations", {
  ...databaseOptions,
  json,
  ...paging,
  owner: text("owner", "Only operations of this owner DID"),
  connector: text("connector", "Only operations of this connector"),
  caller: text("caller", "Only operations of this caller DID"),
  state: Options.choice("state", ["attempted", "committed", "dead", "reconcile_only"]).pipe(
    Options.repeated,
    Options.withDescription("Only operations in this state")
  ),
  document: text("document", "Only operations on this document id"),
  due: Options.boolean("due").pipe(Options.withDescription("Only attempted operations due now")),
  inDoubt: Options.boolean("in-doubt").pipe(
    Options.withDescription("Only operations a request of which may have landed with no outcome known")
  )
}, (options) =>
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
  })).pipe(Command.withDescription("List operations (every caller and owner), newest first, filtered and paged"))

/** `watches`: every watch that passes the filters, by identity, a page at a time. */
export const watchesCommand = Command.make("watches", {
  ...databaseOptions,
  json,
  ...paging,
  owner: text("owner", "Only watches of this owner DID"),
  connector: text("connector", "Only watches of this connector"),
  status: Options.choice("status", ["pending_verification", "verified", "repair_failed"]).pipe(
    Options.repeated,
    Options.withDescription("Only watches in this status")
  ),
  document: text("document", "Only watches of this document id"),
  due: Options.boolean("due").pipe(Options.withDescription("Only watches whose next verification is due now"))
}, (options) =>
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
  })).pipe(Command.withDescription("List projection watches (every owner), filtered and paged"))
