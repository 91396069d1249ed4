#!/usr/bin/env node
import { parseArgs } from "node:util"
import { runSimulationCommand } from "./command.js"

const HELP = `Usage: node packages/simulation/dist/main.js [options]   (npm start runs connector-store simulate, the same)

Runs a connector simulation against a real store: concurrent runners write
back the user's edits to a flaky fake provider while crashes are injected at
every step, then prints a report and checks the invariants (exit 1 if one fails).

  --database <path | postgres://…>  the store (also CONNECTOR_STORE_DATABASE);
                                    default: a new SQLite file in a temp folder, removed after
                                    the run unless an invariant failed or --keep is given
  --file <path>                     the same as --database
  --seed <n>                        same seed, same report (without --processes; default: random, printed)
  --operations <n>                  write-backs to run (default 120)
  --runners <n>                     concurrent runners (default 4)
  --processes <n>                   run the runners in n child processes, each with its own store (default 0)
  --duration <time>                 the longest the write-back phase may take: 90s, 2m, 500ms (default 60s)
  --blind-resend                    runners ignore the store's reissue and re-send blindly (to see the check fail)
  --no-prepared-statements          Postgres statements sent unnamed (for PgBouncer in transaction mode before 1.21)
  --explain                         walk through one write-back step by step instead
  --keep                            keep the temporary SQLite file (its path and how to inspect it are printed)
  --json                            print the report as JSON on stdout, alone (progress and notes go to stderr);
                                    through npm, keep npm's own lines off stdout: npm start --silent -- --json | jq
  --help                            this text
`

const count = (name: string, text: string | undefined): number | undefined => {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text)) throw new RangeError(`--${name} must be a whole number (got "${text}")`)
  return Number(text)
}

const main = async (): Promise<number> => {
  const { values } = parseArgs({
    options: {
      database: { type: "string" },
      file: { type: "string" },
      seed: { type: "string" },
      operations: { type: "string" },
      runners: { type: "string" },
      processes: { type: "string" },
      duration: { type: "string" },
      explain: { type: "boolean" },
      "blind-resend": { type: "boolean" },
      "no-prepared-statements": { type: "boolean" },
      json: { type: "boolean" },
      keep: { type: "boolean" },
      help: { type: "boolean" }
    },
    strict: true
  })
  if (values.help === true) {
    process.stdout.write(HELP)
    return 0
  }
  return runSimulationCommand({
    database: values.database ?? values.file,
    seed: values.seed,
    operations: count("operations", values.operations),
    runners: count("runners", values.runners),
    processes: count("processes", values.processes),
    duration: values.duration,
    explain: values.explain === true,
    json: values.json === true,
    blindResend: values["blind-resend"] === true,
    ...(values["no-prepared-statements"] === true ? { prepareStatements: false } : {}),
    keep: values.keep === true
  }, { stdout: process.stdout, stderr: process.stderr, env: process.env })
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    const tag = (error as { _tag?: string })?._tag
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(`connector-store simulation: ${tag === undefined ? "" : `${tag}: `}${message}\n`)
    process.exit(2)
  }
)
