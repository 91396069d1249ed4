import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions, json } from "../options.js"
import { requiredOperationKeyOptions, requiredWatchIdentityOptions } from "../target.js"

const handlers = () => import("../handlers/actions.js")

const dueOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDefault("now"), Options.withDescription(`${description}: now, a duration from now (10m) or an ISO time`))

const optionalText = (name: string, description: string) => Options.text(name).pipe(Options.optional, Options.withDescription(description))

/** `settle`: records what a lookup found about an operation whose outcome was unknown. */
export const settleCommand = Command.make("settle", {
  ...databaseOptions,
  json,
  ...requiredOperationKeyOptions,
  outcome: Options.choice("outcome", ["committed", "dead"]).pipe(
    Options.withDescription("committed: the provider holds the write; dead: it does not, and it will not be sent again")
  ),
  source: optionalText("source", "committed: the provider entity id the write produced"),
  document: optionalText("document", "committed: the local document the write projects into"),
  etag: optionalText("etag", "committed: the provider etag of the entity"),
  entity: optionalText("entity", "committed: the provider entity as JSON"),
  watchDue: dueOption("watch-due", "committed: when the watch's first verification falls due")
}, (options) => loaded(handlers, (handler) => handler.settle(options))).pipe(Command.withDescription(
  "Settle a reconcile_only operation (or a dead one still in doubt) after a lookup at the provider: committed with the provider's entity, or dead"
))

/** `retry`: makes a dead operation due again when that cannot send a request twice. */
export const retryCommand = Command.make(
  "retry",
  { ...databaseOptions, json, ...requiredOperationKeyOptions },
  (options) => loaded(handlers, (handler) => handler.retry(options))
).pipe(Command.withDescription(
  "Retry a dead operation: refused while a request of it may have landed, unless its reissue intent makes a re-send safe"
))

/** `rearm`: opens a new verification generation of a watch by hand. */
export const rearmCommand = Command.make("rearm", {
  ...databaseOptions,
  json,
  ...requiredWatchIdentityOptions,
  due: dueOption("due", "When the new generation's first verification falls due")
}, (options) => loaded(handlers, (handler) => handler.rearm(options))).pipe(
  Command.withDescription("Re-arm a watch (a manual arm): a new generation, pending, due at --due")
)

/** `collect`: retention of finished operations (and optionally ended relist runs). */
export const collectCommand = Command.make("collect", {
  ...databaseOptions,
  json,
  before: Options.text("before").pipe(
    Options.withDefault("7d"),
    Options.withDescription(
      "Collect what finished before this: a duration ago (7d, 12h) or an ISO date; default 7d. " +
        "An operation's idempotency key is remembered only while its row is kept: a caller replaying " +
        "a key after its row went creates a new operation and sends again, so keep this at least 24h " +
        "longer than any caller may retry a key"
    )
  ),
  limit: Options.integer("limit").pipe(Options.withDefault(1000), Options.withDescription("At most this many rows")),
  relistRuns: Options.boolean("relist-runs").pipe(Options.withDescription("Also collect ended relist runs"))
}, (options) => loaded(handlers, (handler) => handler.collect(options))).pipe(
  Command.withDescription("Delete finished operations no longer needed (the retention rule), oldest first")
)


/** `end-failover-doubt`: ends the window of doubt a noticed failover or restore opened. */
export const endFailoverDoubtCommand = Command.make("end-failover-doubt", {
  ...databaseOptions,
  json,
  by: Options.text("by").pipe(Options.withDescription("Who ends it, for the record (a name or an email)"))
}, (options) => loaded(handlers, (handler) => handler.endFailoverDoubt(options))).pipe(Command.withDescription(
  "End the window of doubt of a noticed failover or restore early, once its lost commits are known: claims are decided as usual again"
))
