import { Command, Options } from "@effect/cli"
import { Clock, Effect, Option } from "effect"
import { databaseOptions, json, paging } from "../options.js"
import { withStore } from "../store.js"
import { output, runJson, runsTable } from "../views.js"
import { checkedLimit, nextPageHint } from "./lists.js"

/** `relist list`: relist runs, newest first. */
export const relistListCommand = Command.make("list", {
  ...databaseOptions,
  json,
  ...paging,
  state: Options.choice("state", ["started", "listing", "complete", "abandoned", "superseded"]).pipe(
    Options.repeated,
    Options.withDescription("Only runs in this state (repeatable)")
  )
}, (options) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const now = yield* Clock.currentTimeMillis
    const page = yield* withStore(options, (store) =>
      store.listRelistRuns({
        states: options.state.length === 0 ? undefined : options.state,
        limit,
        cursor: Option.getOrUndefined(options.cursor)
      }))
    yield* output(
      options.json,
      () => ({ runs: page.items.map(runJson), nextCursor: page.nextCursor }),
      () => page.items.length === 0 ? "no relist runs match" : runsTable(page.items, now)
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
          ? `abandoned relist run ${options.run}: it takes no more pages and yields no candidates`
          : `relist run ${options.run} had already ended; nothing changed`
    )
  })).pipe(Command.withDescription("Abandon a relist run: no more pages, no deletion or divergence candidates"))

/** `relist`: list or abandon relist runs. */
export const relistCommand = Command.make("relist").pipe(
  Command.withDescription("Relist runs: list, abandon"),
  Command.withSubcommands([relistListCommand, relistAbandonCommand])
)
