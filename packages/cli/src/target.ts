import type { OperationKey, WatchIdentity } from "@connector-store/core"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { CliError } from "./errors.js"

const text = (name: string, description: string) => Options.text(name).pipe(Options.optional, Options.withDescription(description))

/** The options naming one operation by its idempotency key. */
export const operationKeyOptions = {
  caller: text("caller", "The caller DID of the operation's idempotency key"),
  operation: text("operation", "The operation id of the operation's idempotency key")
} as const

/** The options naming one operation by its idempotency key, both required (an action's). */
export const requiredOperationKeyOptions = {
  caller: Options.text("caller").pipe(Options.withDescription("The caller DID of the operation's idempotency key")),
  operation: Options.text("operation").pipe(Options.withDescription("The operation id of the operation's idempotency key"))
} as const

/** The operation key that `requiredOperationKeyOptions` name. */
export const requiredOperationKeyOf = (options: { readonly caller: string; readonly operation: string }): OperationKey => ({
  callerDID: options.caller,
  operationID: options.operation
})

/** The options naming one watch by its identity, each required (an action's). */
export const requiredWatchIdentityOptions = {
  owner: Options.text("owner").pipe(Options.withDescription("The watch's owner DID")),
  connector: Options.text("connector").pipe(Options.withDescription("The watch's connector")),
  model: Options.text("model").pipe(Options.withDescription("The watch's model")),
  account: Options.text("account").pipe(Options.withDescription("The watch's account key")),
  source: Options.text("source").pipe(Options.withDescription("The watch's provider source id"))
} as const

/** The options naming one watch by its identity. */
export const watchIdentityOptions = {
  owner: text("owner", "The watch's owner DID"),
  connector: text("connector", "The watch's connector"),
  model: text("model", "The watch's model"),
  account: text("account", "The watch's account key"),
  source: text("source", "The watch's provider source id")
} as const

/** The operation key the options name, or a clear error saying which flag is missing. */
export const operationKeyOf = (options: {
  readonly caller: Option.Option<string>
  readonly operation: Option.Option<string>
}): Effect.Effect<OperationKey, CliError> =>
  Option.isSome(options.caller) && Option.isSome(options.operation)
    ? Effect.succeed({ callerDID: options.caller.value, operationID: options.operation.value })
    : Effect.fail(new CliError({
      message: `name the operation with --caller and --operation (missing ${Option.isNone(options.caller) ? "--caller" : "--operation"})`
    }))

/** The watch identity the options name, or a clear error listing the missing flags. */
export const watchIdentityOf = (options: {
  readonly owner: Option.Option<string>
  readonly connector: Option.Option<string>
  readonly model: Option.Option<string>
  readonly account: Option.Option<string>
  readonly source: Option.Option<string>
}): Effect.Effect<WatchIdentity, CliError> => {
  const missing = (["owner", "connector", "model", "account", "source"] as const).filter((flag) => Option.isNone(options[flag]))
  if (missing.length > 0) {
    return Effect.fail(new CliError({ message: `name the watch with ${missing.map((flag) => `--${flag}`).join(", ")} (missing)` }))
  }
  const value = (o: Option.Option<string>) => Option.getOrThrow(o)
  return Effect.succeed({
    ownerDID: value(options.owner),
    connectorName: value(options.connector),
    model: value(options.model),
    accountKey: value(options.account),
    sourceID: value(options.source)
  })
}
