import { allOptionNames } from "../optionNames.js"
import type { Check, InputShape } from "../validation.js"
import { atMost, fieldOf, fieldsOf, httpStatusOrNull, optional, orNull, Rules, shapeOf } from "../validation.js"
import type { ProviderScope } from "./ProviderLimit.js"

/** The largest cap a scope may have (the column is a 32-bit integer). */
export const MAX_IN_FLIGHT = 2_147_483_647

/** The input of `setProviderLimit`: a scope and its cap. */
export interface ProviderLimitInput extends ProviderScope {
  /** At most this many live leases in the scope at once (1 to `MAX_IN_FLIGHT`); null clears the cap. */
  readonly maxInFlight: number | null
}

/** The input of `pauseProvider`: a scope, until when, and why. */
export interface ProviderPauseInput extends ProviderScope {
  /** No operation of the scope is leased before this time (store clock, epoch ms). */
  readonly until: number
  /** The HTTP status behind the pause (100-599), e.g. 429; null or absent when none. */
  readonly status?: number | null | undefined
}

const optionalId = optional(Rules.id)
const LIMIT = fieldsOf<ProviderLimitInput>("limit", {
  connectorName: Rules.id,
  accountKey: optionalId,
  maxInFlight: orNull(atMost(Rules.positiveInt, MAX_IN_FLIGHT, ", or null"))
})
const PAUSE = fieldsOf<ProviderPauseInput>("pause", {
  connectorName: Rules.id,
  accountKey: optionalId,
  until: Rules.millis,
  status: optional(httpStatusOrNull)
})

/** The checks of a `ProviderScope` under `prefix`. */
export const scopeChecks = (prefix: string, scope: unknown): Array<Check> => [
  [prefix, scope, Rules.record],
  [`${prefix}.connectorName`, fieldOf(scope, "connectorName"), Rules.id],
  [`${prefix}.accountKey`, fieldOf(scope, "accountKey"), optionalId]
]

/** The checks of a `ProviderLimitInput`. */
export const limitInputChecks = (input: unknown): ReadonlyArray<Check> => LIMIT.checks(input)

/** The checks of a `ProviderPauseInput`. */
export const pauseInputChecks = (input: unknown): ReadonlyArray<Check> => PAUSE.checks(input)

/** The fields of a `ProviderScope`. */
export const SCOPE_SHAPE: InputShape = shapeOf(allOptionNames<ProviderScope>()(["connectorName", "accountKey"]))

/** The fields of a `ProviderLimitInput`. */
export const LIMIT_INPUT_SHAPE: InputShape = LIMIT.shape

/** The fields of a `ProviderPauseInput`. */
export const PAUSE_INPUT_SHAPE: InputShape = PAUSE.shape
