import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions, json, paging } from "../options.js"

const handlers = () => import("../handlers/relist.js")

/** `relist list`: relist runs, newest first. */
export const relistListCommand = Command.make("list", {
  ...databaseOptions,
  json,
  ...paging,
  state: Options.choice("state", ["started", "listing", "complete", "abandoned", "superseded"]).pipe(
    Options.repeated,
    Options.withDescription("Only runs in this state")
  )
}, (options) => loaded(handlers, (handler) => handler.list(options))).pipe(Command.withDescription("List relist runs, newest first"))

/** `relist abandon`: ends a current run on purpose; it yields no candidates. */
export const relistAbandonCommand = Command.make("abandon", {
  ...databaseOptions,
  json,
  run: Options.text("run").pipe(Options.withDescription("The run id to abandon"))
}, (options) => loaded(handlers, (handler) => handler.abandon(options))).pipe(
  Command.withDescription("Abandon a relist run: no more pages, no deletion or divergence candidates")
)

const scopeOptions = {
  owner: Options.text("owner").pipe(Options.withDescription("The scope's owner DID")),
  connector: Options.text("connector").pipe(Options.withDescription("The scope's connector")),
  model: Options.text("model").pipe(Options.withDescription("The scope's model")),
  account: Options.text("account").pipe(Options.withDescription("The scope's account key"))
} as const

/** `relist given-up`: a scope's sweep candidates that failed too often to apply and wait for a person. */
export const relistGivenUpCommand = Command.make("given-up", {
  ...databaseOptions,
  json,
  ...scopeOptions,
  limit: paging.limit,
  after: Options.text("after").pipe(Options.optional, Options.withDescription("Only candidates after this source id"))
}, (options) => loaded(handlers, (handler) => handler.givenUp(options))).pipe(
  Command.withDescription("List a scope's given-up sweep candidates (deletions or divergences that failed to apply 5 times)")
)

/** `relist rearm-candidate`: opens a given-up candidate again for the sweep. */
export const relistRearmCandidateCommand = Command.make("rearm-candidate", {
  ...databaseOptions,
  json,
  ...scopeOptions,
  source: Options.text("source").pipe(Options.withDescription("The candidate's provider source id"))
}, (options) => loaded(handlers, (handler) => handler.rearmCandidate(options))).pipe(
  Command.withDescription("Re-arm a given-up sweep candidate: open again, its decision made afresh")
)

/** `relist`: relist runs and given-up sweep candidates. */
export const relistCommand = Command.make("relist").pipe(
  Command.withDescription("Relist runs (list, abandon) and given-up sweep candidates (given-up, rearm-candidate)"),
  Command.withSubcommands([relistListCommand, relistAbandonCommand, relistGivenUpCommand, relistRearmCandidateCommand])
)
