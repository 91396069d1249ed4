import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions, json } from "../options.js"

const handlers = () => import("../handlers/limits.js")

/** The scope every limits command but `list` names: a provider account, or without `--account` the whole connector. */
const scopeOptions = {
  connector: Options.text("connector").pipe(Options.withDescription("The connector whose limit this is")),
  account: Options.text("account").pipe(
    Options.optional,
    Options.withDescription("The provider account (its accountKey); absent, the limit is the whole connector's")
  )
}

/** `limits list`: every scope's pause and cap. */
export const limitsListCommand = Command.make("list", { ...databaseOptions, json }, (options) =>
  loaded(handlers, (handler) => handler.list(options))).pipe(
    Command.withDescription("List every provider limit: its scope, cap of leases in flight, and pause")
  )

/** `limits set`: caps a scope's live operation leases. */
export const limitsSetCommand = Command.make("set", {
  ...databaseOptions,
  json,
  ...scopeOptions,
  maxInFlight: Options.text("max-in-flight").pipe(
    Options.withDescription("The most operations of the scope leased at once, or \"none\" to clear the cap")
  )
}, (options) => loaded(handlers, (handler) => handler.set(options))).pipe(
  Command.withDescription("Cap how many operations of a provider account (or connector) are leased at once")
)

/** `limits pause`: no operation of the scope is leased before `--until`. */
export const limitsPauseCommand = Command.make("pause", {
  ...databaseOptions,
  json,
  ...scopeOptions,
  until: Options.text("until").pipe(Options.withDescription(
    "Until when: a duration from now (10m, 2h, on this machine's clock; stores on Postgres follow the server's) or an ISO time"
  ))
}, (options) => loaded(handlers, (handler) => handler.pause(options))).pipe(
  Command.withDescription("Pause a provider account (or connector): no claim leases its operations before --until")
)

/** `limits resume`: lifts the scope's pause at once. */
export const limitsResumeCommand = Command.make("resume", { ...databaseOptions, json, ...scopeOptions }, (options) =>
  loaded(handlers, (handler) => handler.resume(options))).pipe(
    Command.withDescription("Lift a provider account's (or connector's) pause at once; its cap stays")
  )

/** `limits`: provider limits shared by every runner of the database. */
export const limitsCommand = Command.make("limits").pipe(
  Command.withDescription(
    "Provider limits shared by every runner (list, set, pause, resume); honoured by stores opened with providerLimits"
  ),
  Command.withSubcommands([limitsListCommand, limitsSetCommand, limitsPauseCommand, limitsResumeCommand])
)
