#!/usr/bin/env node
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { explainWriteBack } from "./explain.js"
import { formatReport } from "./format.js"
import { runSimulation } from "./simulation.js"

const HELP = `Usage: npm start -- [options]

Runs a connector simulation against a real store: concurrent runners write
back the user's edits to a flaky fake provider while crashes are injected at
every step, then prints a report and checks the invariants (exit 1 if one fails).

  --database <path | postgres://…>  the store (also CONNECTOR_STORE_DATABASE);
                                    default: a new SQLite file in a temp folder
  --file <path>                     the same as --database
  --seed <n>                        same seed, same provider behaviour (default: random, printed)
  --operations <n>                  write-backs to run (default 120)
  --runners <n>                     concurrent runners (default 4)
  --processes <n>                   run the runners in n child processes, each with its own store (default 0)
  --duration <time>                 the longest the write-back phase may take: 90s, 2m, 500ms (default 60s)
  --blind-resend                    runners ignore the store's reissue and re-send blindly (to see the check fail)
  --explain                         walk through one write-back step by step instead
  --json                            print the report as JSON
  --help                            this text
`

/** A duration like `90s`, `2m`, `500ms` or a plain number of seconds, in milliseconds. */
const parseDuration = (text: string): number => {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim())
  if (match === null) throw new RangeError(`--duration must look like 90s, 2m or 500ms (got "${text}")`)
  const value = Number(match[1])
  return Math.round(match[2] === "ms" ? value : match[2] === "m" ? value * 60_000 : value * 1_000)
}

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
      json: { type: "boolean" },
      help: { type: "boolean" }
    },
    strict: true
  })
  if (values.help === true) {
    process.stdout.write(HELP)
    return 0
  }
  const database = values.database ?? values.file ?? process.env["CONNECTOR_STORE_DATABASE"] ?? process.env["CONNECTOR_STORE_URL"] ??
    join(mkdtempSync(join(tmpdir(), "connector-store-sim-")), "connector-store-demo.sqlite")
  if (values.explain === true) {
    const walkthrough = await explainWriteBack({ database })
    process.stdout.write(values.json === true ? JSON.stringify(walkthrough, null, 2) + "\n" : walkthrough.text + "\n")
    return 0
  }
  const json = values.json === true
  const out = json ? process.stderr : process.stdout
  const report = await runSimulation({
    database,
    seed: values.seed,
    operations: count("operations", values.operations),
    runners: count("runners", values.runners),
    processes: count("processes", values.processes),
    blindResend: values["blind-resend"] === true,
    durationMs: values.duration === undefined ? undefined : parseDuration(values.duration),
    progress: out.isTTY === true ? "live" : json ? "none" : "lines",
    write: (text) => void out.write(text)
  })
  process.stdout.write(json ? JSON.stringify(report, null, 2) + "\n" : formatReport(report) + "\n")
  return report.ok ? 0 : 1
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
