import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { explainWriteBack } from "./explain.js"
import { formatReport } from "./format.js"
import { describeDatabase, runSimulation } from "./simulation.js"

/** The options of a simulation run, as a command line gives them (already parsed). */
export interface SimulationArgs {
  /** A SQLite file path or a `postgres://` URL (default: `CONNECTOR_STORE_DATABASE`, else a new SQLite file in a temp folder). */
  readonly database?: string | undefined
  readonly seed?: string | undefined
  readonly operations?: number | undefined
  readonly runners?: number | undefined
  readonly processes?: number | undefined
  /** The longest the write-back phase may take: `90s`, `2m`, `500ms` or a plain number of seconds. */
  readonly duration?: string | undefined
  readonly explain?: boolean | undefined
  readonly json?: boolean | undefined
  readonly blindResend?: boolean | undefined
  /** Whether the run's stores send named prepared statements on Postgres (default true; see `SqlConnection.prepareStatements`). */
  readonly prepareStatements?: boolean | undefined
  /** Keep the temporary database of a run given no database (by default it is removed unless an invariant failed). */
  readonly keep?: boolean | undefined
}

/** Where a simulation command prints: the report to `stdout`, progress to `stderr` with `--json`. */
export interface SimulationIO {
  readonly stdout: { readonly isTTY?: boolean | undefined; write(text: string): unknown }
  readonly stderr: { readonly isTTY?: boolean | undefined; write(text: string): unknown }
  readonly env: Readonly<Record<string, string | undefined>>
}

/**
 * A duration like `90s`, `2m`, `500ms` or a plain number of seconds, in
 * milliseconds; anything else is a `RangeError` naming `--duration`.
 */
export const parseDuration = (text: string): number => {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim())
  if (match === null) throw new RangeError(`--duration must look like 90s, 2m or 500ms (got "${text}")`)
  const value = Number(match[1])
  return Math.round(match[2] === "ms" ? value : match[2] === "m" ? value * 60_000 : value * 1_000)
}

/** The database a run uses: the given one, the environment's, or a new SQLite file in a temp folder. */
export const simulationDatabase = (database: string | undefined, env: SimulationIO["env"]): string =>
  chosenDatabase(database, env) ?? temporaryDatabase()

const chosenDatabase = (database: string | undefined, env: SimulationIO["env"]): string | undefined =>
  database ?? env["CONNECTOR_STORE_DATABASE"] ?? env["CONNECTOR_STORE_URL"]

const TEMPORARY_NAME = "connector-store-demo.sqlite"

const temporaryDatabase = (): string => join(mkdtempSync(join(tmpdir(), "connector-store-sim-")), TEMPORARY_NAME)

/** `text` as one shell word. */
const shellWord = (text: string): string => /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`

/** The command that shows what a run left in `database` (a Postgres URL without its password). */
export const inspectCommand = (database: string): string => {
  let target = database
  if (/^postgres(ql)?:/i.test(database)) {
    const url = new URL(database)
    url.password = ""
    for (const name of [...url.searchParams.keys()]) {
      if (/password/i.test(name)) url.searchParams.delete(name)
    }
    target = url.toString()
  }
  return `npx --no-install connector-store status --database ${shellWord(target)}`
}

/**
 * What becomes of a run's database, in a line or two: a temporary one is
 * removed (its folder with it) unless `keep` or the run found a violation;
 * one that stays is named, with the command to inspect it.
 */
const settleDatabase = (database: string, temporary: boolean, keep: boolean, violated: boolean): string => {
  if (temporary && !keep && !violated) {
    rmSync(dirname(database), { recursive: true, force: true })
    return "The run's temporary SQLite file was removed; pass --keep (or --database <file>) to keep the store and inspect it afterwards."
  }
  const why = temporary && violated ? " (kept because an invariant failed)" : ""
  return `The store is at ${describeDatabase(database)}${why}; inspect it with:\n  ${inspectCommand(database)}`
}

/**
 * Runs the simulation (or, with `explain`, the walkthrough of one write-back)
 * and prints its report. Resolves to the exit code: 0 when every invariant
 * held, 1 when one failed. Bad options and a database that cannot be opened
 * reject, before anything is written to the store for a bad option.
 */
export const runSimulationCommand = async (args: SimulationArgs, io: SimulationIO): Promise<number> => {
  const durationMs = args.duration === undefined ? undefined : parseDuration(args.duration)
  const chosen = chosenDatabase(args.database, io.env)
  const database = chosen ?? temporaryDatabase()
  const temporary = chosen === undefined
  const keep = args.keep === true
  const json = args.json === true
  // With --json, stdout holds the JSON alone: everything else goes to stderr.
  const out = json ? io.stderr : io.stdout
  let violated = false
  try {
    if (args.explain === true) {
      const walkthrough = await explainWriteBack({ database, prepareStatements: args.prepareStatements })
      io.stdout.write(json ? JSON.stringify(walkthrough, null, 2) + "\n" : walkthrough.text + "\n")
      return 0
    }
    const report = await runSimulation({
      database,
      seed: args.seed,
      operations: args.operations,
      runners: args.runners,
      processes: args.processes,
      blindResend: args.blindResend === true,
      prepareStatements: args.prepareStatements,
      durationMs,
      progress: out.isTTY === true ? "live" : "lines",
      write: (text) => void out.write(text)
    })
    violated = !report.ok
    io.stdout.write(json ? JSON.stringify(report, null, 2) + "\n" : formatReport(report) + "\n")
    return report.ok ? 0 : 1
  } finally {
    out.write(settleDatabase(database, temporary, keep, violated) + "\n")
  }
}
