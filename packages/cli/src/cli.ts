import { Command, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Cause, Console, Effect } from "effect"
import { collectCommand, rearmCommand, retryCommand, settleCommand } from "./commands/actions.js"
import { operationsCommand, watchesCommand } from "./commands/lists.js"
import { migrateCommand } from "./commands/migrate.js"
import { relistCommand } from "./commands/relist.js"
import { showCommand } from "./commands/show.js"
import { simulateCommand } from "./commands/simulate.js"
import { statusCommand } from "./commands/status.js"
import { describeError } from "./store.js"

/** The `connector-store` command and its subcommands. */
export const rootCommand = Command.make("connector-store").pipe(
  Command.withDescription("Inspect and repair a connector store on SQLite or Postgres"),
  Command.withSubcommands([
    migrateCommand,
    statusCommand,
    operationsCommand,
    watchesCommand,
    showCommand,
    settleCommand,
    retryCommand,
    rearmCommand,
    collectCommand,
    relistCommand,
    simulateCommand
  ])
)

/** The CLI over an argv (`process.argv` shape: node, script, args…). */
export const cli = Command.run(rootCommand, { name: "connector-store", version: "0.1.0" })

/** The CLI failed; what went wrong was already printed. */
export class CliExit extends Error {}

/**
 * Runs the CLI on `argv`. Argument errors are printed by the parser; every
 * other failure is printed as one line, `connector-store: <what went
 * wrong>`. Either way the effect fails with `CliExit`, for a non-zero exit.
 */
export const runCli = (argv: ReadonlyArray<string>) =>
  cli(argv).pipe(
    Effect.catchAllCause((cause): Effect.Effect<never, CliExit> => {
      if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
      const error = Cause.squash(cause)
      if (ValidationError.isValidationError(error)) return Effect.fail(new CliExit())
      return Effect.zipRight(Console.error(`connector-store: ${describeError(error)}`), Effect.fail(new CliExit()))
    }),
    Effect.provide(NodeContext.layer)
  )
