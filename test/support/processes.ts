import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

/**
 * Runs `test/support/processes/<script>.mjs` in a separate Node process (on
 * the built packages, `npm run build`), with Node's own `nodeFlags`, and
 * resolves with what it printed.
 */
export const runProcess = (script: string, args: ReadonlyArray<string>, nodeFlags: ReadonlyArray<string> = []): Promise<string> =>
  new Promise((resolve, reject) => {
    const path = fileURLToPath(new URL(`./processes/${script}.mjs`, import.meta.url))
    execFile(process.execPath, [...nodeFlags, path, ...args], { timeout: 60_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${script} failed: ${error.message}\n${stderr}`)) : resolve(stdout))
  })
