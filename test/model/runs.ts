import type fc from "fast-check"
import { propertyRuns } from "../support/runs.js"

/** Runs per adapter and property: `CONNECTOR_STORE_MODEL_RUNS` (CI sets 200), 200 by default (see `propertyRuns`). */
export { MODEL_RUNS } from "../support/runs.js"

/**
 * The fast-check parameters of a model property: the run count, and a
 * failure's `seed` and `path` to replay when `CONNECTOR_STORE_MODEL_SEED` and
 * `CONNECTOR_STORE_MODEL_PATH` are set (fast-check prints both on failure,
 * and the counterexample's `replayPath`, see `commandsReplay`).
 */
export const modelParameters = <T>(): fc.Parameters<T> => {
  const seed = process.env["CONNECTOR_STORE_MODEL_SEED"]
  const path = process.env["CONNECTOR_STORE_MODEL_PATH"]
  return {
    numRuns: propertyRuns(200),
    ...(seed === undefined ? {} : { seed: Number(seed) }),
    ...(path === undefined ? {} : { path })
  }
}

/**
 * The constraints of a model's `fc.commands`: at most `maxCommands`, and the
 * failure's `replayPath` when `CONNECTOR_STORE_MODEL_REPLAY` is set (with the
 * seed and path above, the shrunk command list replays exactly).
 */
export const commandsConstraints = (maxCommands: number): fc.CommandsContraints => {
  const replayPath = process.env["CONNECTOR_STORE_MODEL_REPLAY"]
  return { maxCommands, size: "max", ...(replayPath === undefined ? {} : { replayPath }) }
}

/**
 * A turn of the event loop, taken between runs: on the memory adapter a whole
 * run can settle in microtasks, and a property that never lets the loop turn
 * starves the test worker's own messages to vitest (on a loaded machine, past
 * vitest's 60 s RPC timeout: "Timeout calling onTaskUpdate").
 */
export const turnOfTheEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
