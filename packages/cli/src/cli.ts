import * as Command from "@effect/cli/Command"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { collectCommand, endFailoverDoubtCommand, rearmCommand, retryCommand, settleCommand } from "./commands/actions.js"
import { operationsCommand, watchesCommand } from "./commands/lists.js"
import { migrateCommand } from "./commands/migrate.js"
import { relistCommand } from "./commands/relist.js"
import { showCommand } from "./commands/show.js"
import { simulateCommand } from "./commands/simulate.js"
import { statusCommand } from "./commands/status.js"
import { syncCommand } from "./commands/sync.js"
import { limitsCommand } from "./commands/limits.js"
import { dashboardCommand } from "./commands/dashboard.js"
import { describeError } from "./errors.js"
import { DATABASE_ENV } from "./options.js"
import { argumentProblem, commandOf, type CommandSpec, commandSpecOf, helpText, plainText, wantsHelp } from "./spec.js"
import { printable, terminalSafe } from "./table.js"

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
    syncCommand,
    limitsCommand,
    simulateCommand,
    dashboardCommand,
    endFailoverDoubtCommand
  ])
)

/** The CLI over an argv (`process.argv` shape: node, script, args…). */
export const cli = Command.run(rootCommand, { name: "connector-store", version: "0.1.0" })

/** The CLI failed; what went wrong was already printed. */
export class CliExit extends Error {}

let rootSpec: CommandSpec | undefined
/** The spec of every command, read once from the command tree. */
export const commandSpec = (): CommandSpec => rootSpec ??= commandSpecOf(rootCommand)

/**
 * A parser message of @effect/cli as one line naming the problem: its help
 * document flattened, its wording mended.
 */
export const parserMessage = (printed: string): string => {
  const text = plainText(printed)
  const missing = /^Expected to find option: '--([\w-]+)'$/.exec(text)
  if (missing !== null) {
    return missing[1] === "database" ? `--database is required (or set ${DATABASE_ENV})` : `--${missing[1]} is required`
  }
  return text.replace(/\bis not a integer\b/g, "is not an integer").replace(/\ba (integer|option|argument)\b/g, "an $1")
}

const failWith = (message: string): Effect.Effect<never, CliExit> =>
  Effect.zipRight(Console.error(`connector-store: ${printable(message)}`), Effect.fail(new CliExit()))

/**
 * `console` with everything it prints made `terminalSafe`: whatever a
 * command prints, a stored value in it cannot reach the terminal as a
 * control character; JSON stays the same JSON.
 */
const safeConsole = (console: Console.Console, error?: (...items: ReadonlyArray<unknown>) => Effect.Effect<void>): Console.Console => {
  const safe = (print: (...items: ReadonlyArray<unknown>) => Effect.Effect<void>) => (...items: ReadonlyArray<unknown>) =>
    print(...items.map((item) => typeof item === "string" ? terminalSafe(item) : item))
  return {
    ...console,
    log: safe(console.log),
    info: safe(console.info),
    warn: safe(console.warn),
    error: error ?? safe(console.error)
  }
}

/**
 * Runs the CLI on `argv`. `--help` prints the command's help, plain text.
 * Every failure, an argument the parser refuses included, is printed as
 * one line on stderr, `connector-store: <what went wrong>`, and the effect
 * fails with `CliExit`, for exit code 1.
 */
export const runCli = (argv: ReadonlyArray<string>): Effect.Effect<void, CliExit> =>
  Effect.suspend((): Effect.Effect<void, CliExit, NodeContext.NodeContext> => {
    const args = argv.slice(2)
    const root = commandSpec()
    if (wantsHelp(args)) return Console.log(terminalSafe(helpText(commandOf(root, args).spec)))
    const builtIn = args.length === 1 && (args[0] === "--version" || args[0] === "--completions")
    const problem = builtIn ? undefined : argumentProblem(root, args)
    if (problem !== undefined) return failWith(problem)
    // What the parser prints about a refused argument is kept, to be printed as one line.
    const parserOutput: Array<string> = []
    const parsed = Console.consoleWith((console) =>
      Effect.withConsole(
        cli(argv),
        safeConsole(console, (...items: ReadonlyArray<unknown>) => Effect.sync(() => void parserOutput.push(items.map(String).join(" "))))
      )
    )
    return parsed.pipe(
      Effect.catchAllCause((cause): Effect.Effect<never, CliExit> => {
        if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
        const error = Cause.squash(cause)
        if (ValidationError.isValidationError(error)) {
          return failWith(parserOutput.length > 0 ? parserMessage(parserOutput.join(" ")) : "the arguments were refused")
        }
        return failWith(describeError(error))
      })
    )
  }).pipe(Effect.provide(NodeContext.layer))
