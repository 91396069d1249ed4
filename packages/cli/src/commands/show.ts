import { formatOperationKey, formatWatchIdentity } from "@connector-store/core"
import { Command, Options } from "@effect/cli"
import { Clock, Effect, Option } from "effect"
import { databaseOptions, json } from "../options.js"
import { CliError, withStoreReadOnly } from "../store.js"
import { operationKeyOf, operationKeyOptions, watchIdentityOf, watchIdentityOptions } from "../target.js"
import { operationFields, operationJson, output, watchFields, watchJson } from "../views.js"

const found = <A>(what: string, option: Option.Option<A>) =>
  Option.match(option, {
    onNone: () => Effect.fail(new CliError({ message: `no ${what}` })),
    onSome: Effect.succeed
  })

/** `show operation`: one operation by its key or node key, with its history fields. */
export const showOperationCommand = Command.make("operation", {
  ...databaseOptions,
  json,
  ...operationKeyOptions,
  nodeKey: Options.text("node-key").pipe(Options.optional, Options.withDescription("The operation's public node key"))
}, (options) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const row = Option.isSome(options.nodeKey)
      ? yield* Effect.flatMap(
        withStoreReadOnly(options, (store) => store.findOperationByNodeKey(options.nodeKey.pipe(Option.getOrThrow))),
        (o) => found(`operation with node key ${Option.getOrThrow(options.nodeKey)}`, o)
      )
      : yield* Effect.flatMap(operationKeyOf(options), (key) =>
        Effect.flatMap(withStoreReadOnly(options, (store) => store.getOperation(key)), (o) =>
          found(`operation ${formatOperationKey(key)}`, o)))
    yield* output(options.json, () => operationJson(row), () => operationFields(row, now))
  })).pipe(Command.withDescription("Show one operation (by --caller and --operation, or --node-key) with its history fields"))

/** `show watch`: one watch by its identity or document, with its history fields. */
export const showWatchCommand = Command.make("watch", {
  ...databaseOptions,
  json,
  ...watchIdentityOptions,
  document: Options.text("document").pipe(Options.optional, Options.withDescription("The watched document id"))
}, (options) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const row = Option.isSome(options.document)
      ? yield* Effect.flatMap(
        withStoreReadOnly(options, (store) => store.getWatchByDocument(Option.getOrThrow(options.document))),
        (o) => found(`watch of document ${Option.getOrThrow(options.document)}`, o)
      )
      : yield* Effect.flatMap(watchIdentityOf(options), (identity) =>
        Effect.flatMap(withStoreReadOnly(options, (store) => store.getWatch(identity)), (o) =>
          found(`watch ${formatWatchIdentity(identity)}`, o)))
    yield* output(options.json, () => watchJson(row), () => watchFields(row, now))
  })).pipe(Command.withDescription("Show one watch (by its identity flags, or --document) with its history fields"))

/** `show`: one operation or watch. */
export const showCommand = Command.make("show").pipe(
  Command.withDescription("Show one operation or watch"),
  Command.withSubcommands([showOperationCommand, showWatchCommand])
)
