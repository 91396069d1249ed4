/** A JSON value, as the store keeps it in its JSON columns and gives it back exactly. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | ReadonlyArray<JsonValue>
  | { readonly [key: string]: JsonValue }

/** How deep a JSON value may nest before it is refused (the encoder recurses). */
export const MAX_JSON_DEPTH = 512

/** The largest JSON value the store keeps: 1 MiB of UTF-8 JSON text per value (a value shared in several places counts for each). */
export const MAX_JSON_BYTES = 1_048_576

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** Bytes of `text` as a JSON string (quotes and escapes included), or more than `limit` once it is sure to pass it. */
const jsonStringBytes = (text: string, limit: number): number => {
  // Every code unit takes at least one byte: a string this long cannot fit.
  if (text.length + 2 > limit) return limit + 1
  let bytes = 2
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x80) {
      bytes += unit === 0x22 || unit === 0x5c ? 2 : unit >= 0x20 ? 1 : unit === 8 || unit === 9 || unit === 10 || unit === 12 || unit === 13 ? 2 : 6
    } else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4
        i++
      } else bytes += 6
    } else bytes += unit >= 0xdc00 && unit <= 0xdfff ? 6 : 3
  }
  return bytes
}

/** Why a walk stopped: the reason, naming a path. */
class JsonRefusal {
  constructor(readonly problem: string) {}
}

/** How a walk copies what it visits: not at all, exactly (`-0` kept), or as `JSON.stringify` would (`-0` as `0`). */
type Copying = "none" | "exact" | "plain"

/** The path of the value the walk is at (`$.items[3]`), from its keys and indices. */
const pathOf = (at: ReadonlyArray<string | number>): string => {
  let path = "$"
  for (const step of at) path += typeof step === "number" ? `[${step}]` : `.${JSON.stringify(step)}`
  return path
}

/**
 * One walk over `value` that refuses what `jsonProblem` names and stops once the text would pass `maxBytes`; each property is
 * read once and the copy (unless `none`) built from that reading.
 */
const walkJson = (value: unknown, maxBytes: number, copying: Copying): unknown => {
  // The objects from the root to where the walk is, and the keys between them.
  const ancestors: Array<object> = []
  const at: Array<string | number> = []
  let bytes = 0
  const refuse = (what: string): never => {
    throw new JsonRefusal(`${pathOf(at)} ${what}`)
  }
  /** Refuses at the depth or size bound, naming a cycle as one at the first object that repeats. */
  const refuseUnbounded = (what: string): never => {
    const seen = new Set<object>()
    for (let i = 0; i < ancestors.length; i++) {
      if (seen.has(ancestors[i]!)) {
        at.length = i
        return refuse("refers back to itself (a cycle)")
      }
      seen.add(ancestors[i]!)
    }
    return refuse(what)
  }
  const add = (more: number) => {
    bytes += more
    if (bytes > maxBytes) refuseUnbounded(`takes the value past ${maxBytes} bytes of JSON text`)
  }
  const readAt = (holder: object, key: string | number): unknown => {
    try {
      return (holder as Record<string | number, unknown>)[key]
    } catch {
      return refuse("could not be read (reading it threw)")
    }
  }
  const visit = (v: unknown, depth: number): unknown => {
    if (v === null) {
      add(4)
      return v
    }
    if (typeof v === "boolean") {
      add(v ? 4 : 5)
      return v
    }
    if (typeof v === "string") {
      add(jsonStringBytes(v, maxBytes - bytes))
      return v
    }
    if (typeof v === "number") {
      if (!Number.isFinite(v)) refuse("is a non-finite number")
      const plain = copying === "plain" && Object.is(v, -0) ? 0 : v
      add(Object.is(plain, -0) ? 2 : String(plain).length)
      return plain
    }
    if (typeof v !== "object") return refuse(`is a ${typeof v}, not a JSON value`)
    ancestors.push(v)
    if (depth >= MAX_JSON_DEPTH) refuseUnbounded(`nests deeper than ${MAX_JSON_DEPTH} levels`)
    let copy: unknown
    if (Array.isArray(v)) {
      const length = v.length
      add(length === 0 ? 2 : 1 + length)
      const items: Array<unknown> | undefined = copying === "none" ? undefined : new Array(length)
      for (let i = 0; i < length; i++) {
        at.push(i)
        if (!(i in v)) refuse("is a hole in a sparse array")
        const item = visit(readAt(v, i), depth + 1)
        at.pop()
        if (items !== undefined) items[i] = item
      }
      copy = items ?? v
    } else {
      if (!isPlainObject(v)) refuse("is not a plain object")
      if (Object.getOwnPropertySymbols(v).length > 0) refuse("has symbol keys")
      const keys = Object.keys(v)
      add(keys.length === 0 ? 2 : 1 + keys.length)
      const fields: Record<string, unknown> | undefined = copying === "none" ? undefined : {}
      for (const key of keys) {
        at.push(key)
        add(jsonStringBytes(key, maxBytes - bytes) + 1)
        const item = visit(readAt(v, key), depth + 1)
        at.pop()
        if (fields === undefined) continue
        if (key === "__proto__") Object.defineProperty(fields, key, { value: item, enumerable: true, writable: true, configurable: true })
        else fields[key] = item
      }
      copy = fields ?? v
    }
    ancestors.pop()
    return copy
  }
  return visit(value, 0)
}

/** The outcome of `takeJson`: the copy, or why the value is refused (naming a path, never a value). */
export type JsonTaken = { readonly value: JsonValue; readonly problem?: undefined } | { readonly problem: string }

/**
 * Reads `value` once as a JSON value the store keeps, copied (`plain` as `JSON.stringify` then `JSON.parse` would, `exact`
 * keeping `-0`) in the walk that checks it; nothing thrown escapes.
 */
export const takeJson = (value: unknown, copying: Copying, maxBytes: number = MAX_JSON_BYTES): JsonTaken => {
  try {
    return { value: walkJson(value, maxBytes, copying) as JsonValue }
  } catch (thrown) {
    return { problem: thrown instanceof JsonRefusal ? thrown.problem : "$ could not be read (reading it threw)" }
  }
}

/**
 * Why `value` is not a JSON value the store keeps exactly (undefined, functions, symbols, BigInt, non-finite numbers, sparse
 * arrays, non-plain objects, symbol keys, cycles, past `MAX_JSON_DEPTH` or `MAX_JSON_BYTES`), naming the path, never the value;
 * `undefined` when it is one.
 */
export const jsonProblem = (value: unknown): string | undefined => takeJson(value, "none").problem

/** True when `value` is a JSON value the store keeps exactly (see `jsonProblem`). */
export const isJsonValue = (value: unknown): value is JsonValue => jsonProblem(value) === undefined

const encodeNumber = (n: number): string => Object.is(n, -0) ? "-0" : JSON.stringify(n)

const encode = (value: JsonValue): string => {
  if (typeof value === "number") return encodeNumber(value)
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value)) return `[${(value as ReadonlyArray<JsonValue>).map(encode).join(",")}]`
  const record = value as { readonly [key: string]: JsonValue }
  return `{${Object.keys(record).map((key) => `${JSON.stringify(key)}:${encode(record[key]!)}`).join(",")}}`
}

/** The text of a JSON column (`null` stays SQL null) that `decodeJsonColumn` reads back equal, `-0` included. */
export const encodeJsonColumn = (value: JsonValue): string | null => value === null ? null : encode(value)

/** The value of a JSON column written by `encodeJsonColumn` (or by the seed's store). */
export const decodeJsonColumn = (text: string | null): JsonValue => text === null ? null : JSON.parse(text) as JsonValue
