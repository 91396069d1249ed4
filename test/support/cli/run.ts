import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

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
