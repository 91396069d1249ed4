import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions, json, paging } from "../options.js"

const text = (name: string, description: string) => Options.text(name).pipe(Options.optional, Options.withDescription(description))

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
}, (options) => loaded(() => import("../handlers/lists.js"), (handler) => handler.operations(options))).pipe(
  Command.withDescription("List operations (every caller and owner), newest first, filtered and paged")
)

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
}, (options) => loaded(() => import("../handlers/lists.js"), (handler) => handler.watches(options))).pipe(
  Command.withDescription("List projection watches (every owner), filtered and paged")
)
