import type fc from "fast-check"
import type { RealStore } from "../RealStore.js"
import type { WatchModel } from "../WatchModel.js"

/**
 * A command of the watch model: applicable in every state (inputs that depend
 * on the state, like "the current generation", are resolved when it runs), so
 * shrinking can drop any command without invalidating the rest.
 */
export abstract class ModelCommand implements fc.AsyncCommand<WatchModel, RealStore> {
  check(): boolean {
    return true
  }
  abstract run(m: WatchModel, r: RealStore): Promise<void>
  abstract toString(): string
}

/** A time never before zero (the store refuses negative times). */
export const at = (now: number, offset: number): number => Math.max(0, now + offset)

/** Renders an offset from the run's clock, e.g. `now+3`. */
export const rel = (offset: number): string => offset === 0 ? "now" : offset > 0 ? `now+${offset}` : `now${offset}`
