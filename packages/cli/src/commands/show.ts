import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { loaded } from "../lazy.js"
import { databaseOptions, json } from "../options.js"
import { operationKeyOptions, watchIdentityOptions } from "../target.js"

const handlers = () => import("../handlers/show.js")

/** `show operation`: one operation by its key or node key, with its history fields. */
export const showOperationCommand = Command.make("operation", {
  ...databaseOptions,
  json,
  ...operationKeyOptions,
  nodeKey: Options.text("node-key").pipe(Options.optional, Options.withDescription("The operation's public node key"))
}, (options) => loaded(handlers, (handler) => handler.operation(options))).pipe(Command.withDescription(
  "Show one operation (by --caller and --operation, or --node-key) with its history fields; a row that cannot be decoded is shown raw"
))

/** `show watch`: one watch by its identity or document, with its history fields. */
export const showWatchCommand = Command.make("watch", {
  ...databaseOptions,
  json,
  ...watchIdentityOptions,
  document: Options.text("document").pipe(Options.optional, Options.withDescription("The watched document id"))
}, (options) => loaded(handlers, (handler) => handler.watch(options))).pipe(Command.withDescription(
  "Show one watch (by its identity flags, or --document) with its history fields; a row that cannot be decoded is shown raw"
))

/** `show`: one operation or watch. */
export const showCommand = Command.make("show").pipe(
  Command.withDescription("Show one operation or watch"),
  Command.withSubcommands([showOperationCommand, showWatchCommand])
)
