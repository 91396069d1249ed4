import { Command, Options } from "@effect/cli"
import { Clock, Console, Effect, Option } from "effect"
import { databaseOptions, json, paging } from "../options.js"
import { withStore, withStoreReadOnly } from "../store.js"
import { printable } from "../table.js"
import { candidatesTable, output, pageText, quietly, runJson, runsTable } from "../views.js"
import { checkedLimit, nextPageHint } from "./lists.js"

/** `relist list`: relist runs, newest first. */
export const relistListCommand = Command.make("list", {
  ...databaseOptions,
  json,
  ...paging,
  state: Options.choice("state", ["started", "listing", "complete", "abandoned", "superseded"]).pipe(
    Options.repeated,
    Options.withDescription("Only runs in this state")
  )
}, (options) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const now = yield* Clock.currentTimeMillis
    const page = yield* withStoreReadOnly(options, (store) =>
      quietly(store.listRelistRuns({
        states: options.state.length === 0 ? undefined : options.state,
        limit,
        cursor: Option.getOrUndefined(options.cursor)
      })))
    yield* output(
      options.json,
      () => ({ runs: page.items.map(runJson), nextCursor: page.nextCursor, corrupt: page.corrupt }),
      () => pageText(page.items, page.corrupt, "no relist runs match", (items) => runsTable(items, now))
    )
    if (!options.json) yield* nextPageHint(page.nextCursor)
  })).pipe(Command.withDescription("List relist runs, newest first"))

/** `relist abandon`: ends a current run on purpose; it yields no candidates. */
export const relistAbandonCommand = Command.make("abandon", {
  ...databaseOptions,
  json,
  run: Options.text("run").pipe(Options.withDescription("The run id to abandon"))
}, (options) =>
  Effect.gen(function*() {
    const outcome = yield* withStore(options, (store) => store.abandonRelistRun(options.run))
    yield* output(
      options.json,
      () => ({ runID: options.run, outcome }),
      () =>
        outcome === "abandoned"
          ? `abandoned relist run ${printable(options.run)}: it takes no more pages and yields no candidates`
          : `relist run ${printable(options.run)} had already ended; nothing changed`
    )
  })).pipe(Command.withDescription("Abandon a relist run: no more pages, no deletion or divergence candidates"))

const scopeOptions = {
  owner: Options.text("owner").pipe(Options.withDescription("The scope's owner DID")),
  connector: Options.text("connector").pipe(Options.withDescription("The scope's connector")),
  model: Options.text("model").pipe(Options.withDescription("The scope's model")),
  account: Options.text("account").pipe(Options.withDescription("The scope's account key"))
} as const

const scopeOf = (options: { owner: string; connector: string; model: string; account: string }) => ({
  ownerDID: options.owner,
  connectorName: options.connector,
  model: options.model,
  accountKey: options.account
})

/** `relist given-up`: a scope's sweep candidates that failed too often to apply and wait for a person. */
export const relistGivenUpCommand = Command.make("given-up", {
  ...databaseOptions,
  json,
  ...scopeOptions,
  limit: paging.limit,
  after: Options.text("after").pipe(Options.optional, Options.withDescription("Only candidates after this source id"))
}, (options) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const rows = yield* withStoreReadOnly(options, (store) =>
      store.listGivenUpSweepCandidates(scopeOf(options), { limit, after: Option.getOrUndefined(options.after) }))
    const last = rows[rows.length - 1]
    yield* output(
      options.json,
      () => ({ candidates: rows.map((row) => ({ ...row, createdAt: new Date(row.createdAt).toISOString(), updatedAt: new Date(row.updatedAt).toISOString() })) }),
      () => rows.length === 0 ? "no given-up candidates" : candidatesTable(rows)
    )
    if (!options.json && rows.length === limit && last !== undefined) yield* Console.log(`\nnext page: --after ${printable(last.sourceID)}`)
  })).pipe(Command.withDescription("List a scope's given-up sweep candidates (deletions or divergences that failed to apply 5 times)"))

/** `relist rearm-candidate`: opens a given-up candidate again for the sweep. */
export const relistRearmCandidateCommand = Command.make("rearm-candidate", {
  ...databaseOptions,
  json,
  ...scopeOptions,
  source: Options.text("source").pipe(Options.withDescription("The candidate's provider source id"))
}, (options) =>
  Effect.gen(function*() {
    const outcome = yield* withStore(options, (store) => store.rearmSweepCandidate({ ...scopeOf(options), sourceID: options.source }))
    yield* output(
      options.json,
      () => ({ sourceID: options.source, outcome }),
      () =>
        outcome === "rearmed"
          ? `re-armed sweep candidate ${printable(options.source)}: open again, apply attempts reset`
          : `sweep candidate ${printable(options.source)} is not given up; nothing changed`
    )
  })).pipe(Command.withDescription("Re-arm a given-up sweep candidate: open again, its decision made afresh"))

/** `relist`: relist runs and given-up sweep candidates. */
export const relistCommand = Command.make("relist").pipe(
  Command.withDescription("Relist runs (list, abandon) and given-up sweep candidates (given-up, rearm-candidate)"),
  Command.withSubcommands([relistListCommand, relistAbandonCommand, relistGivenUpCommand, relistRearmCandidateCommand])
)
