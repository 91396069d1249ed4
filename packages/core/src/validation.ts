import { Effect } from "effect"
import { InvalidInput } from "./errors.js"

/** A rule over one input value: `undefined` when it holds, else what is wrong. */
export type Rule = (value: unknown) => string | undefined

const isString = (value: unknown): value is string => typeof value === "string"

/** Rules for the inputs of the public API. */
export const Rules = {
  /** A non-empty string. */
  id: (value) => isString(value) && value.length > 0 ? undefined : "must be a non-empty string",
  /** Any string (possibly empty). */
  text: (value) => isString(value) ? undefined : "must be a string",
  /** A time in epoch milliseconds: a non-negative safe integer. */
  millis: (value) =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0
      ? undefined
      : "must be a finite, non-negative integer number of milliseconds",
  /** A time cutoff: any finite number. */
  finite: (value) => typeof value === "number" && Number.isFinite(value) ? undefined : "must be a finite number",
  /** A whole number above zero. */
  positiveInt: (value) =>
    typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? undefined : "must be a positive integer",
  /** A whole number, zero or above. */
  nonNegativeInt: (value) =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? undefined : "must be a non-negative integer",
  /** A digest string, or null. */
  digestOrNull: (value) => value === null || isString(value) ? undefined : "must be a digest string or null",
  /** An array of non-empty strings. */
  ids: (value) =>
    Array.isArray(value) && value.every((item) => isString(item) && item.length > 0)
      ? undefined
      : "must be an array of non-empty strings",
  /** An object (not null, not an array). */
  record: (value) =>
    typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : "must be an object"
} satisfies Record<string, Rule>

/** One of the listed literal values. */
export const oneOf = (...allowed: ReadonlyArray<string | null>): Rule => (value) =>
  allowed.includes(value as string | null) ? undefined : `must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}`

/** The rule, or `undefined` allowed too. */
export const optional = (rule: Rule): Rule => (value) => value === undefined ? undefined : rule(value)

/** One check: the field's name, its value, and its rule. */
export type Check = readonly [field: string, value: unknown, rule: Rule]

/**
 * Runs the checks in order and fails with an `InvalidInput` naming the first
 * field that breaks its rule.
 */
export const validate = (method: string, checks: ReadonlyArray<Check>): Effect.Effect<void, InvalidInput> =>
  Effect.suspend(() => {
    for (const [field, value, rule] of checks) {
      const reason = rule(value)
      if (reason !== undefined) return Effect.fail(new InvalidInput({ method, field, reason }))
    }
    return Effect.void
  })

/** Checks that `value` is an object before its fields are read; a missing argument fails as `field`. */
export const validateRecord = (method: string, field: string, value: unknown): Effect.Effect<void, InvalidInput> =>
  validate(method, [[field, value, Rules.record]])

/** The checks for a watch identity under `prefix`. */
export const identityChecks = (prefix: string, identity: unknown): ReadonlyArray<Check> => {
  const parts = ["ownerDID", "connectorName", "model", "accountKey", "sourceID"] as const
  return [
    [prefix, identity, Rules.record],
    ...parts.map((part): Check => [`${prefix}.${part}`, fieldOf(identity, part), Rules.id])
  ]
}

/** Reads `key` of an input that may not be an object (for checks before it is validated). */
export const fieldOf = (input: unknown, key: string): unknown =>
  typeof input === "object" && input !== null ? (input as Record<string, unknown>)[key] : undefined
