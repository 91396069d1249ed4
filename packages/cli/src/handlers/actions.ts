import { formatOperationKey, formatWatchIdentity, isInDoubt, safeReissue, type SettleOperationInput } from "@connector-store/core"
import { Clock, Effect, Option } from "effect"
import { CliError, type DatabaseOptions, withStore } from "../store.js"
import { printable } from "../table.js"
import { requiredOperationKeyOf } from "../target.js"
import { isoTime, parseTime, relativeTime } from "../time.js"
import { operationJson, output, watchJson } from "../views.js"

/** The options of an action on one operation: its key and `--json`. */
interface OperationActionOptions extends DatabaseOptions {
  readonly json: boolean
  readonly caller: string
  readonly operation: string
}

/** A due time from a flag: `now`, a duration from now (`10m`) or an ISO time. */
export const dueTimeOf = (flag: string, text: string, now: number) => {
  const at = parseTime(text, now, 1)
  return at === undefined || at < 0
    ? Effect.fail(new CliError({ message: `--${flag} must be "now", a duration like 10m or 2h, or an ISO time; got ${JSON.stringify(text)}` }))
    : Effect.succeed(at)
}

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
export const settle = (options: OperationActionOptions & {
  readonly outcome: "committed" | "dead"
  readonly source: Option.Option<string>
  readonly document: Option.Option<string>
  readonly etag: Option.Option<string>
  readonly entity: Option.Option<string>
  readonly watchDue: string
}) =>
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
  })

/** `retry`: makes a dead operation due again when that cannot send a request twice. */
export const retry = (options: OperationActionOptions) =>
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
  })

/** `rearm`: opens a new verification generation of a watch by hand. */
export const rearm = (options: DatabaseOptions & {
  readonly json: boolean
  readonly owner: string
  readonly connector: string
  readonly model: string
  readonly account: string
  readonly source: string
  readonly due: string
}) =>
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
  })

/** `collect`: retention of finished operations (and optionally ended relist runs). */
export const collect = (options: DatabaseOptions & {
  readonly json: boolean
  readonly before: string
  readonly limit: number
  readonly relistRuns: boolean
}) =>
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
  })

/** `end-failover-doubt`: ends the window of doubt of the failover (or restore) noticed last. */
export const endFailoverDoubt = (options: DatabaseOptions & { readonly json: boolean; readonly by: string }) =>
  Effect.gen(function*() {
    const result = yield* withStore(options, (store) => store.endFailoverDoubt({ by: options.by }))
    yield* output(
      options.json,
      () => result.outcome === "none" ? result : {
        outcome: result.outcome,
        failover: { ...result.failover, noticedAt: isoTime(result.failover.noticedAt), until: isoTime(result.failover.until) }
      },
      () =>
        result.outcome === "none"
          ? "no window of doubt is in force"
          : `ended the window of doubt of the failover noticed ${isoTime(result.failover.noticedAt)} ` +
            `(${result.failover.doubtfulClaims} claim(s) went out in doubt): claims are decided as usual again`
    )
  })
