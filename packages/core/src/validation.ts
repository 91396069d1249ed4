import { Effect } from "effect"
import { InvalidInput } from "./errors.js"

/** A rule over one input value: `undefined` when it holds, else what is wrong. */
export type Rule = (value: unknown) => string | undefined

const isString = (value: unknown): value is string => typeof value === "string"

/**
 * The longest identifier, in UTF-8 bytes. Five of them (a watch's or a sweep
 * candidate's key) must fit one Postgres btree index row, at most 2704
 * bytes: five ids of 530 bytes do, five of 540 do not (measured on
 * Postgres 16), so 512 leaves room for the row header.
 */
export const MAX_ID_BYTES = 512

/** The longest free text (a digest, a message, a sync time), in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 1_048_576

/** The length of `value` in UTF-8 bytes (of a well-formed string). */
export const utf8Length = (value: string): number => {
  let bytes = 0
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i)
    if (unit < 0x80) bytes += 1
    else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff) {
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}

const HAS_NUL = "must not contain NUL (\\u0000)"
const HAS_LONE_SURROGATE = "must be well-formed Unicode (no lone surrogates)"

/**
 * What keeps a string from being stored alike on every adapter, or
 * `undefined`: Postgres text refuses NUL, and the SQL drivers replace a lone
 * surrogate with U+FFFD where memory keeps it. One pass over the string
 * (every hot call checks a dozen of them); a NUL is named before a lone
 * surrogate, wherever each is.
 */
const storableText = (value: string, maxBytes: number): string | undefined => {
  let bytes = 0
  let lone = false
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i)
    if (unit < 0x80) {
      if (unit === 0) return HAS_NUL
      bytes += 1
    } else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4
        i++
      } else lone = true
    } else if (unit >= 0xdc00 && unit <= 0xdfff) lone = true
    else bytes += 3
  }
  if (lone) return HAS_LONE_SURROGATE
  return bytes > maxBytes ? `must be at most ${maxBytes} bytes of UTF-8 (got ${bytes})` : undefined
}

const idRule: Rule = (value) =>
  isString(value) && value.length > 0 ? storableText(value, MAX_ID_BYTES) : "must be a non-empty string"

/** True when `value` is a time in epoch milliseconds: a non-negative safe integer. */
export const isTime = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0

/** Rules for the inputs of the public API. */
export const Rules = {
  /** A non-empty string of at most `MAX_ID_BYTES`, without NUL or lone surrogates. */
  id: idRule,
  /** Any string (possibly empty) of at most `MAX_TEXT_BYTES`, without NUL or lone surrogates. */
  text: (value) => isString(value) ? storableText(value, MAX_TEXT_BYTES) : "must be a string",
  /** A time in epoch milliseconds: a non-negative safe integer. */
  millis: (value) => isTime(value) ? undefined : "must be a finite, non-negative integer number of milliseconds",
  /** A time cutoff: any finite number. */
  finite: (value) => typeof value === "number" && Number.isFinite(value) ? undefined : "must be a finite number",
  /** A whole number above zero. */
  positiveInt: (value) =>
    typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? undefined : "must be a positive integer",
  /** A whole number, zero or above. */
  nonNegativeInt: (value) =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? undefined : "must be a non-negative integer",
  /** A digest string (as `text`), or null. */
  digestOrNull: (value) =>
    value === null ? undefined : isString(value) ? storableText(value, MAX_TEXT_BYTES) : "must be a digest string or null",
  /** An array of ids (each as `id`). */
  ids: (value) => {
    if (!Array.isArray(value)) return "must be an array of non-empty strings"
    for (let i = 0; i < value.length; i++) {
      const reason = idRule(value[i])
      if (reason !== undefined) return `[${i}] ${reason}`
    }
    return undefined
  },
  /** A function (a callback the store calls). */
  callback: (value) => typeof value === "function" ? undefined : "must be a function",
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

/** The `InvalidInput` naming the first field that breaks its rule, or undefined when every check passes. */
export const firstProblem = (method: string, checks: ReadonlyArray<Check>): InvalidInput | undefined => {
  for (const [field, value, rule] of checks) {
    const reason = rule(value)
    if (reason !== undefined) return new InvalidInput({ method, field, reason })
  }
  return undefined
}

/**
 * Runs the checks in order and fails with an `InvalidInput` naming the first
 * field that breaks its rule.
 */
export const validate = (method: string, checks: ReadonlyArray<Check>): Effect.Effect<void, InvalidInput> =>
  Effect.suspend(() => {
    const problem = firstProblem(method, checks)
    return problem === undefined ? Effect.void : Effect.fail(problem)
  })

/**
 * Runs `body` only once every check passed: the body is not even built
 * before, so a malformed argument fails as `InvalidInput`, never as a
 * defect thrown while reading it.
 */
export const validated = <A, E, R>(
  method: string,
  checks: ReadonlyArray<Check>,
  body: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E | InvalidInput, R> => Effect.zipRight(validate(method, checks), Effect.suspend(body))

/** Checks that `value` is an object before its fields are read; a missing argument fails as `field`. */
export const validateRecord = (method: string, field: string, value: unknown): Effect.Effect<void, InvalidInput> =>
  validate(method, [[field, value, Rules.record]])

const IDENTITY_PARTS = ["ownerDID", "connectorName", "model", "accountKey", "sourceID"] as const
const identityFieldNames = new Map<string, ReadonlyArray<string>>()

/** The checks for a watch identity under `prefix`, then `more`. */
export const identityChecks = (prefix: string, identity: unknown, ...more: ReadonlyArray<Check>): Array<Check> => {
  let names = identityFieldNames.get(prefix)
  if (names === undefined) {
    names = IDENTITY_PARTS.map((part) => `${prefix}.${part}`)
    identityFieldNames.set(prefix, names)
  }
  const checks: Array<Check> = [[prefix, identity, Rules.record]]
  for (let i = 0; i < IDENTITY_PARTS.length; i++) checks.push([names[i]!, fieldOf(identity, IDENTITY_PARTS[i]!), Rules.id])
  checks.push(...more)
  return checks
}

/** Reads `key` of an input that may not be an object (for checks before it is validated). */
export const fieldOf = (input: unknown, key: string): unknown =>
  typeof input === "object" && input !== null ? (input as Record<string, unknown>)[key] : undefined
