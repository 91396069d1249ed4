import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { CliError, describeError } from "../errors.js"
import { DATABASE_ENV, noPreparedStatements } from "../options.js"

const count = (name: string, description: string) =>
  Options.text(name).pipe(Options.optional, Options.withDescription(description))

/** The options of `simulate`, those of `npm start` (`packages/simulation/src/main.ts`). */
const simulateOptions = {
  database: Options.text("database").pipe(
    Options.withAlias("file"),
    Options.optional,
    Options.withDescription(`A SQLite file path or a postgres:// URL (default: $${DATABASE_ENV}, else a new SQLite file in a temp folder)`)
  ),
  seed: Options.text("seed").pipe(
    Options.optional,
    Options.withDescription("Same seed, same run and report in one process (default: random, printed)")
  ),
  operations: count("operations", "Write-backs to run (default 120)"),
  runners: count("runners", "Concurrent runners (default 4)"),
  processes: count("processes", "Run the runners in n child processes, each with its own store (default 0)"),
  duration: Options.text("duration").pipe(
    Options.optional,
    Options.withDescription("The longest the write-back phase may take: 90s, 2m, 500ms (default 60s)")
  ),
  explain: Options.boolean("explain").pipe(Options.withDescription("Walk through one write-back step by step instead")),
  json: Options.boolean("json").pipe(Options.withDescription("Print the report as JSON (progress goes to stderr)")),
  keep: Options.boolean("keep").pipe(
    Options.withDescription("Keep the run's temporary SQLite file (it is kept anyway when an invariant failed)")
  ),
  blindResend: Options.boolean("blind-resend").pipe(
    Options.withDescription("Runners ignore the store's reissue and re-send blindly (to see the check fail)")
  ),
  noPreparedStatements
} as const

/** A count option: a whole number, or a `CliError` naming the flag and what it got. */
const wholeNumber = (flag: string, value: Option.Option<string>) =>
  Option.match(value, {
    onNone: () => Effect.succeed(undefined),
    onSome: (text) =>
      /^\d+$/.test(text)
        ? Effect.succeed(Number(text))
        : Effect.fail(new CliError({ message: `--${flag} must be a whole number, got ${JSON.stringify(text)}` }))
  })

/**
 * `simulate`: the connector simulation of `npm start` against a real store.
 * Fails (a non-zero exit) when an invariant of the run failed, after the report.
 */
export const simulateCommand = Command.make("simulate", simulateOptions, (options) =>
  Effect.gen(function*() {
    const args = {
      database: Option.getOrUndefined(options.database),
      seed: Option.getOrUndefined(options.seed),
      operations: yield* wholeNumber("operations", options.operations),
      runners: yield* wholeNumber("runners", options.runners),
      processes: yield* wholeNumber("processes", options.processes),
      duration: Option.getOrUndefined(options.duration),
      explain: options.explain,
      json: options.json,
      keep: options.keep,
      blindResend: options.blindResend,
      ...(options.noPreparedStatements ? { prepareStatements: false } : {})
    }
    const code = yield* Effect.tryPromise({
      // The simulation (its store, drivers and fault model) is loaded only when it runs.
      try: () =>
        import("@connector-store/simulation").then(({ runSimulationCommand }) =>
          runSimulationCommand(args, { stdout: process.stdout, stderr: process.stderr, env: process.env })
        ),
      catch: (error) => new CliError({ message: `simulate: ${describeError(error)}` })
    })
    if (code !== 0) return yield* new CliError({ message: "simulate: an invariant of the run failed (see the report above)" })
  })).pipe(Command.withDescription(
    "Run the connector simulation (what npm start runs): concurrent runners, a flaky provider and crashes, then an invariant check"
  ))
