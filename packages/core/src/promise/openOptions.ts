import { Layer } from "effect"
import { InvalidInput } from "../errors.js"
import { operationPolicyProblem } from "../operation/policy.js"
import { allOptionNames, unknownKeyOf } from "../optionNames.js"
import type { WinnerReaders } from "../ports/WinnerReader.js"
import { type Check, fieldOf, optional, type Rule, Rules } from "../validation.js"

export { allOptionNames, nearestName, unknownKeyOf } from "../optionNames.js"

/** What every adapter's Promise store accepts besides where it lives. */
export interface StoreObservability {
  /** A layer provided to the store's runtime (a tracer, a logger, a metric exporter), where its spans and metrics go. */
  readonly observability?: Layer.Layer<never, unknown, never> | undefined
}

const aLayer: Rule = (value) => Layer.isLayer(value) ? undefined : "must be an Effect Layer"

/** The checks every adapter's open options share: the clock, the winner readers, the policy, observability, provider limits. */
export const commonOpenChecks = (options: unknown): ReadonlyArray<Check> => [
  ["options.now", fieldOf(options, "now"), optional(Rules.callback)],
  ["options.readWinner", fieldOf(options, "readWinner"), optional(Rules.callback)],
  ["options.readWinners", fieldOf(options, "readWinners"), optional(Rules.callback)],
  ["options.operationPolicy", fieldOf(options, "operationPolicy"), optional(Rules.record)],
  ["options.observability", fieldOf(options, "observability"), optional(aLayer)],
  ["options.providerLimits", fieldOf(options, "providerLimits"), optional((v) => typeof v === "boolean" ? undefined : "must be true or false")]
]

/** The option names every adapter's Promise store takes besides its own. */
export const COMMON_OPEN_OPTIONS = ["now", "readWinner", "readWinners", "operationPolicy", "observability", "providerLimits"] as const

/** The first problem of a store's open options as an `InvalidInput` (an unknown key first, naming the nearest), or `undefined`. */
export const openOptionsProblem = (
  method: string,
  options: unknown,
  checks: ReadonlyArray<Check>,
  known: ReadonlyArray<string>
): InvalidInput | undefined => {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return new InvalidInput({ method, field: "options", reason: "must be an object" })
  }
  const unknown = unknownKeyOf(options, known, `an option of ${method}`)
  if (unknown !== undefined) return new InvalidInput({ method, field: `options.${unknown.key}`, reason: unknown.reason })
  for (const [field, value, rule] of [...checks, ...commonOpenChecks(options)]) {
    const reason = rule(value)
    if (reason !== undefined) return new InvalidInput({ method, field, reason })
  }
  const policy = fieldOf(options, "operationPolicy")
  if (policy !== undefined) {
    const problem = operationPolicyProblem(policy as never)
    if (problem !== undefined) {
      return new InvalidInput({ method, field: `options.operationPolicy.${problem.field}`, reason: problem.reason })
    }
  }
  return undefined
}

const READERS = allOptionNames<WinnerReaders>()(["readWinner", "readWinners"])

/** The problem of an Effect layer's `readers` argument (not an object, or an unknown key) as `method`'s `InvalidInput`, or `undefined`. */
export const winnerReadersProblem = (method: string, readers: unknown): InvalidInput | undefined => {
  if (typeof readers !== "object" || readers === null || Array.isArray(readers)) {
    return new InvalidInput({ method, field: "readers", reason: "must be an object" })
  }
  const unknown = unknownKeyOf(readers, READERS, "a winner reader")
  return unknown === undefined ? undefined : new InvalidInput({ method, field: `readers.${unknown.key}`, reason: unknown.reason })
}
