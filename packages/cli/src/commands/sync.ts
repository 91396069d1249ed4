import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions, json, paging } from "../options.js"

const handlers = () => import("../handlers/sync.js")

/** `sync list`: every sync state, by connector and owner, with where its lease stands. */
export const syncListCommand = Command.make("list", {
  ...databaseOptions,
  json,
  ...paging,
  connector: Options.text("connector").pipe(Options.optional, Options.withDescription("Only sync states of this connector")),
  owner: Options.text("owner").pipe(Options.optional, Options.withDescription("Only sync states of this owner DID")),
  lease: Options.choice("lease", ["none", "held", "stale"]).pipe(
    Options.optional,
    Options.withDescription("Only sync states whose lease is in this state (stale: expired and never released)")
  )
}, (options) => loaded(handlers, (handler) => handler.list(options))).pipe(
  Command.withDescription("List sync states (every connector and owner) with where each lease stands")
)

/** `sync release`: clears the sync lease of a runner that is gone. */
export const syncReleaseCommand = Command.make("release", {
  ...databaseOptions,
  json,
  connector: Options.text("connector").pipe(Options.withDescription("The sync state's connector")),
  owner: Options.text("owner").pipe(Options.withDescription("The sync state's owner DID")),
  force: Options.boolean("force").pipe(
    Options.withDescription("Release a live lease too: only when its runner is surely gone, or two runners may sync at once")
  )
}, (options) => loaded(handlers, (handler) => handler.release(options))).pipe(
  Command.withDescription("Release a stuck sync lease (its runner gone): stale ones at once, live ones with --force")
)

/** `sync`: sync states and their leases. */
export const syncCommand = Command.make("sync").pipe(
  Command.withDescription("Sync states (list) and stuck sync leases (release)"),
  Command.withSubcommands([syncListCommand, syncReleaseCommand])
)
