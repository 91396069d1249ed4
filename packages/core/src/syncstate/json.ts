/**
 * A JSON value: what the store keeps in its JSON columns (a sync checkpoint,
 * a recovery buffer) and gives back exactly.
 */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | ReadonlyArray<JsonValue>
  | { readonly [key: string]: JsonValue }

/** How deep a JSON value may nest before it is refused (the encoder recurses). */
export const MAX_JSON_DEPTH = 512

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * Why `value` is not a JSON value the store can keep exactly, or `undefined`
 * when it is. Refused: `undefined` and functions and symbols anywhere, BigInt,
 * NaN and ±Infinity (JSON would turn them into `null` or throw), sparse
 * arrays, objects that are not plain (Date, Map, class instances: JSON would
 * flatten them), symbol keys, cycles, and nesting deeper than
 * `MAX_JSON_DEPTH`. The reason names the path (`$.items[3]`), never the value,
 * so it is safe to show.
 */
export const jsonProblem = (value: unknown): string | undefined => {
  const ancestors = new Set<object>()
  const visit = (v: unknown, path: string, depth: number): string | undefined => {
    if (v === null || typeof v === "boolean" || typeof v === "string") return undefined
    if (typeof v === "number") return Number.isFinite(v) ? undefined : `${path} is a non-finite number`
    if (typeof v !== "object") return `${path} is a ${typeof v}, not a JSON value`
    if (depth >= MAX_JSON_DEPTH) return `${path} nests deeper than ${MAX_JSON_DEPTH} levels`
    if (ancestors.has(v)) return `${path} refers back to itself (a cycle)`
    ancestors.add(v)
    try {
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          if (!(i in v)) return `${path}[${i}] is a hole in a sparse array`
          const problem = visit(v[i], `${path}[${i}]`, depth + 1)
          if (problem !== undefined) return problem
        }
        return undefined
      }
      if (!isPlainObject(v)) return `${path} is not a plain object`
      if (Object.getOwnPropertySymbols(v).length > 0) return `${path} has symbol keys`
      for (const key of Object.keys(v)) {
        const problem = visit((v as Record<string, unknown>)[key], `${path}.${JSON.stringify(key)}`, depth + 1)
        if (problem !== undefined) return problem
      }
      return undefined
    } finally {
      ancestors.delete(v)
    }
  }
  return visit(value, "$", 0)
}

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

/**
 * The text of a JSON column: `null` stays SQL null, anything else is JSON
 * text that `decodeJsonColumn` turns back into an equal value, `-0` included
 * (plain `JSON.stringify` writes it as `0`). The value must pass `jsonProblem`.
 */
export const encodeJsonColumn = (value: JsonValue): string | null => value === null ? null : encode(value)

/** The value of a JSON column written by `encodeJsonColumn` (or by the seed's store). */
export const decodeJsonColumn = (text: string | null): JsonValue => text === null ? null : JSON.parse(text) as JsonValue
