import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { ConfigProvider, Console, Effect, Exit } from "effect"
import { runCli as runCommand } from "../../../packages/cli/src/cli.js"

/** What one run of the CLI did. */
export interface CliRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** The installed command, which runs the bundle (packages/cli/dist/bundle/, from `npm run build`). */
const BIN = fileURLToPath(new URL("../../../packages/cli/bin/connector-store.js", import.meta.url))

/**
 * Runs the built `connector-store` (`npm run build` first) as its own
 * process with `args`; never rejects, so failures can be asserted.
 * `CONNECTOR_STORE_DATABASE` is unset unless `env` sets it; `NO_COLOR` is
 * set unless `env` unsets it (`undefined`). `as` runs it as another user
 * (the caller must be root).
 */
export const runCli = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>> = {},
  as?: { readonly uid: number; readonly gid: number }
): Promise<CliRun> =>
  new Promise((resolve) => {
    const { CONNECTOR_STORE_DATABASE: _, ...inherited } = process.env
    const merged: Record<string, string | undefined> = { ...inherited, NO_COLOR: "1", ...env }
    for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key]
    execFile(
      process.execPath,
      [BIN, ...args],
      { timeout: 90_000, env: merged, ...(as === undefined ? {} : { uid: as.uid, gid: as.gid }) },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
    )
  })

/**
 * Runs the CLI's code with `args` in this process (its source, not the
 * bundle), for tests of what a command does: what it prints on stdout and
 * stderr, and the exit code the command would end with (1 when it failed).
 * It sees no environment but `env`. A run costs tens of milliseconds where
 * a process of its own (`runCli`) costs half a second of a core; the
 * command as installed (its bundle, its process, the real environment) is
 * what `runCli` is for.
 */
export const runCliHere = async (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
): Promise<CliRun> => {
  let stdout = ""
  let stderr = ""
  const print = (into: "stdout" | "stderr") => (...items: ReadonlyArray<unknown>) =>
    Effect.sync(() => {
      const line = `${items.map(String).join(" ")}\n`
      if (into === "stdout") stdout += line
      else stderr += line
    })
  const command = runCommand(["node", "connector-store", ...args]).pipe(
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
  )
  const exit = await Effect.runPromiseExit(Console.consoleWith((console) =>
    Effect.withConsole(command, { ...console, log: print("stdout"), info: print("stdout"), warn: print("stderr"), error: print("stderr") })
  ))
  return { code: Exit.isSuccess(exit) ? 0 : 1, stdout, stderr }
}

/** Parses a run's stdout as JSON, failing loudly with what it printed. */
export const jsonOf = <A = any>(run: CliRun): A => {
  if (run.code !== 0) throw new Error(`CLI exited ${run.code}: ${run.stderr}`)
  return JSON.parse(run.stdout) as A
}

/** Asserts-friendly view of a failed run: its exit code and its stderr lines. */
export const failureOf = (run: CliRun) => ({
  code: run.code,
  lines: run.stderr.trim().split("\n").filter((line) => line.trim().length > 0)
})
