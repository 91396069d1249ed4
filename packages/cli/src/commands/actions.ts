import { formatOperationKey, formatWatchIdentity, isInDoubt, safeReissue, type SettleOperationInput } from "@connector-store/core"
import { Command, Options } from "@effect/cli"
import { Clock, Effect, Option } from "effect"
import { databaseOptions, json } from "../options.js"
import { CliError, withStore } from "../store.js"
import { printable } from "../table.js"
import { requiredOperationKeyOf, requiredOperationKeyOptions, requiredWatchIdentityOptions } from "../target.js"
import { parseTime, relativeTime } from "../time.js"
import { operationJson, output, watchJson } from "../views.js"

/** A due time from a flag: `now`, a duration from now (`10m`) or an ISO time. */
export const dueTimeOf = (flag: string, text: string, now: number) => {
  const at = parseTime(text, now, 1)
  return at === undefined || at < 0
    ? Effect.fail(new CliError({ message: `--${flag} must be "now", a duration like 10m or 2h, or an ISO time; got ${JSON.stringify(text)}` }))
    : Effect.succeed(at)
}

const dueOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDefault("now"), Options.withDescription(`${description}: now, a duration from now (10m) or an ISO time`))

const optionalText = (name: string, description: string) => Options.text(name).pipe(Options.optional, Options.withDescription(description))

const required = (flag: string, value: Option.Option<string>, why: string) =>
  Option.match(value, {
    onNone: () => Effect.fail(new CliError({ message: `--${flag} is required ${why}` })),
    onSome: Effect.succeed
  })

const parsedEntity = (value: Option.Option<string>) =>
  Option.match(value, {
    onNone: () => Effect.succeed(undefined as unknown),
    onSome: (text) =>
      Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: () => new CliError({ message: "--entity must be a JSON value (the provider entity as the lookup found it)" })
      })
  })

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
}, (options) =>
  Effect.gen(function*() {
    const key = requiredOperationKeyOf(options)
    const now = yield* Clock.currentTimeMillis
    const input: SettleOperationInput = options.outcome === "dead"
      ? { outcome: "dead" }
      : {
        outcome: "committed",
        sourceID: yield* required("source", options.source, "to settle as committed"),
        documentID: yield* required("document", options.document, "to settle as committed"),
        providerEtag: Option.getOrNull(options.etag),
        resultEntity: yield* parsedEntity(options.entity),
        watchDueAt: yield* dueTimeOf("watch-due", options.watchDue, now)
      }
    const result = yield* withStore(options, (store) => store.settleOperation(key, input))
    yield* output(
      options.json,
      () => ({
        operation: operationJson(result.operation),
        watch: result.watch === null ? null : watchJson(result.watch),
        superseded: result.superseded
      }),
      () =>
        [
          `settled ${printable(formatOperationKey(key))} as ${result.operation.state}`,
          ...(result.watch === null ? [] : [
            `armed watch ${printable(formatWatchIdentity(result.watch))}: first verification due ${relativeTime(result.watch.nextAttemptAt, now)}`
          ]),
          ...result.superseded.map((identity) => `superseded watch ${printable(formatWatchIdentity(identity))}`)
        ].join("\n")
    )
  })).pipe(Command.withDescription(
    "Settle a reconcile_only operation (or a dead one still in doubt) after a lookup at the provider: committed with the provider's entity, or dead"
  ))

/** `retry`: makes a dead operation due again when that cannot send a request twice. */
export const retryCommand = Command.make("retry", { ...databaseOptions, json, ...requiredOperationKeyOptions }, (options) =>
  Effect.gen(function*() {
    const key = requiredOperationKeyOf(options)
    const row = yield* withStore(options, (store) => store.retryOperation(key))
    const intent = safeReissue(row.reissueIntent)
    yield* output(
      options.json,
      () => operationJson(row),
      () =>
        `retried ${printable(formatOperationKey(key))}: attempted, due now, attempts reset` +
        (isInDoubt(row) && intent !== undefined
          ? `; still in doubt, so the next run re-sends only as ${intent.kind}`
          : "")
    )
  })).pipe(Command.withDescription(
    "Retry a dead operation: refused while a request of it may have landed, unless its reissue intent makes a re-send safe"
  ))

/** `rearm`: opens a new verification generation of a watch by hand. */
export const rearmCommand = Command.make("rearm", {
  ...databaseOptions,
  json,
  ...requiredWatchIdentityOptions,
  due: dueOption("due", "When the new generation's first verification falls due")
}, (options) =>
  Effect.gen(function*() {
    const identity = {
      ownerDID: options.owner,
      connectorName: options.connector,
      model: options.model,
      accountKey: options.account,
      sourceID: options.source
    }
    const now = yield* Clock.currentTimeMillis
    const dueAt = yield* dueTimeOf("due", options.due, now)
    const watch = yield* withStore(options, (store) => store.rearmWatch(identity, { dueAt }))
    yield* output(
      options.json,
      () => watchJson(watch),
      () =>
        `re-armed watch ${printable(formatWatchIdentity(identity))}: generation ${watch.repairGeneration}, ` +
        `pending_verification, due ${relativeTime(watch.nextAttemptAt, now)}`
    )
  })).pipe(Command.withDescription("Re-arm a watch (a manual arm): a new generation, pending, due at --due"))

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
}, (options) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const before = parseTime(options.before, now, -1)
    if (before === undefined) {
      return yield* new CliError({ message: `--before must be a duration like 7d or 12h, or an ISO date; got ${JSON.stringify(options.before)}` })
    }
    if (!Number.isSafeInteger(options.limit) || options.limit < 1) {
      return yield* new CliError({ message: `--limit must be a positive integer, got ${options.limit}` })
    }
    const params = { before, limit: options.limit }
    const [operations, runs] = yield* withStore(options, (store) =>
      Effect.all([
        store.collectFinishedOperations(params),
        options.relistRuns ? store.collectRelistRuns(params) : Effect.succeed(0)
      ]))
    yield* output(
      options.json,
      () => ({ before: new Date(before).toISOString(), operations, relistRuns: runs }),
      () =>
        `collected ${operations} finished operation${operations === 1 ? "" : "s"}` +
        (options.relistRuns ? ` and ${runs} ended relist run${runs === 1 ? "" : "s"}` : "") +
        ` last updated before ${new Date(before).toISOString()}`
    )
  })).pipe(Command.withDescription("Delete finished operations no longer needed (the retention rule), oldest first"))

