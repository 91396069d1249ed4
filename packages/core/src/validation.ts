import { Effect } from "effect"
import { InvalidInput } from "./errors.js"
import { unknownKeyOf } from "./optionNames.js"
import { takeJson } from "./syncstate/json.js"

/** A rule over one input value: `undefined` when it holds, else what is wrong. */
export type Rule = (value: unknown) => string | undefined

const isString = (value: unknown): value is string => typeof value === "string"

/** The longest identifier, in UTF-8 bytes: five of them (a watch's key) fit one Postgres btree index row (2704 bytes). */
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

/** Why a string cannot be stored alike on every adapter (NUL, a lone surrogate, too long), or `undefined`, in one pass. */
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

/** The rule, or `null` allowed too. */
export const orNull = (rule: Rule): Rule => (value) => value === null ? undefined : rule(value)

/** A number `rule` accepts, of at most `max` (the reason ends with `unit`). */
export const atMost = (rule: Rule, max: number, unit = ""): Rule => (value) =>
  rule(value) ?? ((value as number) > max ? `must be at most ${max}${unit}` : undefined)

/** An HTTP status code (100-599), or null. */
export const httpStatusOrNull: Rule = (value) =>
  value === null || (typeof value === "number" && Number.isSafeInteger(value) && value >= 100 && value <= 599)
    ? undefined
    : "must be an HTTP status (100-599) or null"

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

/** Fails with the `InvalidInput` of the first check that fails. */
export const validate = (method: string, checks: ReadonlyArray<Check>): Effect.Effect<void, InvalidInput> =>
  Effect.suspend(() => {
    const problem = firstProblem(method, checks)
    return problem === undefined ? Effect.void : Effect.fail(problem)
  })

/** Runs `body` only once every check passed, so a malformed argument fails as `InvalidInput`, never as a defect. */
export const validated = <A, E, R>(
  method: string,
  checks: ReadonlyArray<Check>,
  body: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E | InvalidInput, R> => Effect.zipRight(validate(method, checks), Effect.suspend(body))

/** Checks that `value` is an object before its fields are read; a missing argument fails as `field`. */
export const validateRecord = (method: string, field: string, value: unknown): Effect.Effect<void, InvalidInput> =>
  validate(method, [[field, value, Rules.record]])

/** The checks of an object under a prefix whose `parts` are ids, then `more`; each prefix's field names are spelled once. */
export const partChecks = (parts: ReadonlyArray<string>) => {
  const fieldNames = new Map<string, ReadonlyArray<string>>()
  return (prefix: string, value: unknown, ...more: ReadonlyArray<Check>): Array<Check> => {
    let names = fieldNames.get(prefix)
    if (names === undefined) {
      names = parts.map((part) => `${prefix}.${part}`)
      fieldNames.set(prefix, names)
    }
    const checks: Array<Check> = [[prefix, value, Rules.record]]
    for (let i = 0; i < parts.length; i++) checks.push([names[i]!, fieldOf(value, parts[i]!), Rules.id])
    checks.push(...more)
    return checks
  }
}

/** The checks for a watch identity under `prefix`, then `more`. */
export const identityChecks: (prefix: string, identity: unknown, ...more: ReadonlyArray<Check>) => Array<Check> = partChecks([
  "ownerDID",
  "connectorName",
  "model",
  "accountKey",
  "sourceID"
])

/** Reads `key` of an input that may not be an object (for checks before it is validated). */
export const fieldOf = (input: unknown, key: string): unknown =>
  typeof input === "object" && input !== null ? (input as Record<string, unknown>)[key] : undefined

/** How a method takes an argument: as it is, as an object (`InputShape`), a list (`{ list }`) or a JSON value (`{ json }`). */
export type Taking = InputShape | ListTaking | JsonTaking | undefined

/** An array argument: its items read once, each taken by `list`. */
export interface ListTaking {
  readonly list: Taking
}

/** A JSON value, copied in the walk that checks it: `plain` as `JSON.stringify` writes it, `exact` keeping `-0`. */
export interface JsonTaking {
  readonly json: "exact" | "plain"
}

/** The known keys of an object argument, and how the ones holding more than a plain value are taken. */
export interface InputShape {
  /** The keys the method reads, each once. */
  readonly keys: ReadonlyArray<string>
  /** Other keys are allowed and never read (an identity whose parts are all required, so a whole row will do). */
  readonly open?: true
  /** How a key holding a nested object, list or JSON value is taken. */
  readonly nested?: Readonly<Record<string, Taking>>
  /** Every key allowed: `keys`, and the ones allowed but never read (see `shapeOf`). */
  readonly accepted: ReadonlyArray<string>
  /** `accepted`, for the per-call check. */
  readonly accepts: ReadonlySet<string>
}

/** A shape closed to other keys: `keys` are read, `ignored` are allowed and never read (fields of a row read back). */
export const shapeOf = (
  keys: ReadonlyArray<string>,
  nested?: Readonly<Record<string, Taking>>,
  ignored: ReadonlyArray<string> = []
): InputShape => {
  const accepted = [...keys, ...ignored]
  return { keys, accepted, accepts: new Set(accepted), ...(nested === undefined ? {} : { nested }) }
}

/** A shape open to other keys (see `InputShape.open`). */
export const openShapeOf = (keys: ReadonlyArray<string>): InputShape => ({ keys, accepted: keys, accepts: new Set(keys), open: true })

/** An array of ids or other plain values, read once. */
export const LIST: ListTaking = { list: undefined }

/** Each field of an object argument with its rule (`undefined`: checked as it is taken), in the order read and checked. */
export type FieldRules<T> = { readonly [K in keyof T]-?: Rule | undefined }

/** An object argument's shape and checks, from one table of its fields (see `fieldsOf`). */
export interface Fields {
  /** The shape the argument is taken by. */
  readonly shape: InputShape
  /** The checks of `value` under the argument's name (the object by its rule, then each field), appended to `into`. */
  readonly checks: (value: unknown, into?: Array<Check>) => Array<Check>
}

/**
 * The `Fields` of an object argument `name` from one table of its fields' rules: its shape (`nested` takings,
 * `ignored` keys) and its checks, the object itself by `record`.
 */
export const fieldsOf = <T extends object>(
  name: string,
  rules: FieldRules<T>,
  { ignored, nested, record = Rules.record }: {
    readonly nested?: Readonly<Record<string, Taking>>
    readonly ignored?: ReadonlyArray<string>
    readonly record?: Rule
  } = {}
): Fields => {
  const keys = Object.keys(rules)
  const checked = keys.flatMap((key) => {
    const rule = (rules as Readonly<Record<string, Rule | undefined>>)[key]
    return rule === undefined ? [] : [[key, `${name}.${key}`, rule] as const]
  })
  return {
    shape: shapeOf(keys, nested, ignored),
    checks: (value, into = []) => {
      into.push([name, value, record])
      for (let i = 0; i < checked.length; i++) {
        const [key, field, rule] = checked[i]!
        into.push([field, fieldOf(value, key), rule])
      }
      return into
    }
  }
}

/** A JSON value kept exactly (see `JsonTaking`). */
export const EXACT_JSON: JsonTaking = { json: "exact" }

/** A JSON value kept as `JSON.stringify` writes it (see `JsonTaking`). */
export const PLAIN_JSON: JsonTaking = { json: "plain" }

class Refused {
  constructor(readonly error: InvalidInput) {}
}

const UNREADABLE = "could not be read (reading it threw)"

const refuse = (method: string, field: string, reason: string): never => {
  throw new Refused(new InvalidInput({ method, field, reason }))
}

const isObjectArgument = (value: unknown): value is object =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const takeObject = (method: string, field: string, value: object, shape: InputShape): Record<string, unknown> => {
  if (shape.open !== true) {
    let present: ReadonlyArray<string>
    try {
      present = Object.keys(value)
    } catch {
      return refuse(method, field, UNREADABLE)
    }
    for (let i = 0; i < present.length; i++) {
      if (shape.accepts.has(present[i]!)) continue
      const unknown = unknownKeyOf({ [present[i]!]: true }, shape.accepted, "a known field")!
      refuse(method, `${field}.${unknown.key}`, unknown.reason)
    }
  }
  const snapshot: Record<string, unknown> = {}
  const keys = shape.keys
  const nested = shape.nested
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    let item: unknown
    try {
      item = (value as Record<string, unknown>)[key]
    } catch {
      refuse(method, `${field}.${key}`, UNREADABLE)
    }
    if (item === undefined) continue
    const taking = nested?.[key]
    snapshot[key] = taking === undefined ? item : take(method, `${field}.${key}`, item, taking)
  }
  return snapshot
}

const takeList = (method: string, field: string, value: ReadonlyArray<unknown>, taking: Taking): Array<unknown> => {
  let length = 0
  try {
    length = value.length
  } catch {
    refuse(method, field, UNREADABLE)
  }
  if (!Number.isSafeInteger(length) || length < 0) return refuse(method, field, "must be an array")
  const copy = new Array<unknown>(length)
  for (let i = 0; i < length; i++) {
    let item: unknown
    try {
      item = value[i]
    } catch {
      refuse(method, `${field}[${i}]`, UNREADABLE)
    }
    copy[i] = taking === undefined ? item : take(method, `${field}[${i}]`, item, taking)
  }
  return copy
}

const take = (method: string, field: string, value: unknown, taking: Taking): unknown => {
  if (taking === undefined) return value
  if ("json" in taking) {
    if (value === undefined) return undefined
    const taken = takeJson(value, taking.json)
    return taken.problem === undefined ? taken.value : refuse(method, field, `must be a JSON value: ${taken.problem}`)
  }
  if ("list" in taking) return Array.isArray(value) ? takeList(method, field, value, taking.list) : value
  return isObjectArgument(value) ? takeObject(method, field, value, taking) : value
}

/**
 * The arguments of a call as the method uses them (each taken by its `Taking`), or the `InvalidInput` they meet: an
 * unknown key is refused before any field is read, then each known field is read once into a plain snapshot.
 */
export const takeArguments = (
  method: string,
  names: ReadonlyArray<string>,
  takings: ReadonlyArray<Taking>,
  args: ArrayLike<unknown>
): Array<unknown> | InvalidInput => {
  const taken = new Array<unknown>(args.length)
  let i = 0
  try {
    for (; i < args.length; i++) taken[i] = take(method, names[i] ?? `argument ${i}`, args[i], takings[i])
  } catch (thrown) {
    // Anything else thrown came from the argument itself (a revoked proxy, say).
    return thrown instanceof Refused ? thrown.error : new InvalidInput({ method, field: names[i] ?? `argument ${i}`, reason: UNREADABLE })
  }
  return taken
}

/** `prepare` (a hot method's) given its arguments as `takeArguments` takes them; a refused argument is its answer. */
export const preparing = <Args extends ReadonlyArray<unknown>, R>(
  method: string,
  names: ReadonlyArray<string>,
  takings: ReadonlyArray<Taking>,
  prepare: (...args: Args) => R
) =>
(...args: Args): R | InvalidInput => {
  const taken = takeArguments(method, names, takings, args)
  return taken instanceof InvalidInput ? taken : prepare(...(taken as unknown as Args))
}

/** An Effect method given its arguments as `takeArguments` takes them; a refused argument fails the call. */
export const taking = <Args extends ReadonlyArray<unknown>, A, E, R>(
  method: string,
  names: ReadonlyArray<string>,
  takings: ReadonlyArray<Taking>,
  body: (...args: Args) => Effect.Effect<A, E, R>
) =>
(...args: Args): Effect.Effect<A, E | InvalidInput, R> => {
  const taken = takeArguments(method, names, takings, args)
  return taken instanceof InvalidInput ? Effect.fail(taken) : body(...(taken as unknown as Args))
}
