// The id and text rules read each string once (they run a dozen times per hot
// call). This holds them to their plain statement, written here the obvious
// way: refuse NUL first, then a lone surrogate, then more than the byte limit
// of UTF-8; over arbitrary strings, with NULs, surrogate halves and long
// multi-byte runs made likely.
import { jsonProblem, type JsonValue, MAX_ID_BYTES, MAX_JSON_BYTES } from "@connector-store/core"
import { encodeJsonColumn, Rules } from "@connector-store/core/adapter"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { propertyRuns } from "./support/runs.js"

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** The rule as stated: NUL, then lone surrogates, then the UTF-8 length (Buffer's count, on well-formed text). */
const reference = (value: string, maxBytes: number): string | undefined => {
  if (value.includes("\u0000")) return "must not contain NUL (\\u0000)"
  if (LONE_SURROGATE.test(value)) return "must be well-formed Unicode (no lone surrogates)"
  const bytes = Buffer.byteLength(value, "utf8")
  return bytes > maxBytes ? `must be at most ${maxBytes} bytes of UTF-8 (got ${bytes})` : undefined
}

/** Code units chosen to hit every branch: ASCII, NUL, 2- and 3-byte characters, both surrogate halves. */
const unit = fc.oneof(
  fc.constantFrom(0x00, 0x41, 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xe000, 0xffff),
  fc.integer({ min: 0, max: 0xffff })
)
const text = fc.array(unit, { maxLength: 40 }).map((units) => String.fromCharCode(...units))
/** Strings near the id limit: a run of one character of 1 to 4 bytes, plus a tail. */
const nearLimit = fc.tuple(fc.constantFrom("a", "é", "€", "😀"), fc.integer({ min: 120, max: 520 }), text)
  .map(([char, count, tail]) => char.repeat(count) + tail)

describe("id and text rules", () => {
  it("agree with the rule as stated on any string", () => {
    fc.assert(
      fc.property(fc.oneof(text, nearLimit), (value) => {
        expect(Rules.text(value)).toBe(reference(value, 1_048_576))
        expect(Rules.id(value)).toBe(value.length === 0 ? "must be a non-empty string" : reference(value, MAX_ID_BYTES))
      }),
      { numRuns: propertyRuns(3000) }
    )
  })

  it("name NUL before a lone surrogate wherever each is, and count a pair as four bytes", () => {
    expect(Rules.id("\uD800a\u0000")).toBe("must not contain NUL (\\u0000)")
    expect(Rules.id("a\uDC00")).toBe("must be well-formed Unicode (no lone surrogates)")
    expect(Rules.id("\uD800")).toBe("must be well-formed Unicode (no lone surrogates)")
    expect(Rules.id("😀".repeat(128))).toBeUndefined()
    expect(Rules.id("😀".repeat(128) + "a")).toBe(`must be at most ${MAX_ID_BYTES} bytes of UTF-8 (got 513)`)
  })
})

// The JSON bound counts a value's text as the store writes it (as
// `JSON.stringify` does, but `-0` kept as `-0`), to the byte: padded to just
// under, at, or just over `MAX_JSON_BYTES`, a value is
// accepted exactly when its text fits, whatever its strings hold (escapes,
// multi-byte characters, surrogate pairs and lone halves). A graph of shared
// objects counts each place it appears, as its text repeats it.
const jsonValue = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.jsonValue({ maxDepth: 3, stringUnit: "binary" }),
  fc.jsonValue({ maxDepth: 2, stringUnit: fc.constantFrom("\"", "\\", "\n", "\u0001", "\u001f", "é", "€", "😀", "\uD800", "\uDC00") })
)

/** `value` under a padding key whose string makes the whole text `MAX_JSON_BYTES + over` bytes. */
const paddedTo = (value: unknown, over: number) => {
  const bare = Buffer.byteLength(encodeJsonColumn({ value, pad: "" } as JsonValue)!, "utf8")
  const padding = MAX_JSON_BYTES + over - bare
  return padding < 0 ? undefined : { value, pad: "x".repeat(padding) }
}

describe("the JSON size bound", () => {
  it("counts -0 as the store writes it, -0", () => {
    expect(jsonProblem(paddedTo({ "": -0 }, 0))).toBeUndefined()
    expect(jsonProblem(paddedTo({ "": -0 }, 1))).toMatch(/bytes of JSON text$/)
  })

  it("accepts a value exactly when its JSON text fits in MAX_JSON_BYTES", () => {
    fc.assert(
      fc.property(jsonValue, fc.integer({ min: -2, max: 2 }), (value, over) => {
        const padded = paddedTo(value, over)
        if (padded === undefined) return
        const problem = jsonProblem(padded)
        if (over <= 0) expect(problem).toBeUndefined()
        else expect(problem).toMatch(new RegExp(`takes the value past ${MAX_JSON_BYTES} bytes of JSON text$`))
      }),
      { numRuns: propertyRuns(60) }
    )
  })

  it("counts a shared object each time it appears, and stops at the bound", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 14 }), fc.integer({ min: -2, max: 2 }), (levels, over) => {
        let node: unknown = { leaf: "x" }
        for (let i = 0; i < levels; i++) node = { left: node, right: node }
        const padded = paddedTo(node, over)
        if (padded === undefined) return
        expect(jsonProblem(padded) === undefined).toBe(over <= 0)
      }),
      { numRuns: propertyRuns(40) }
    )
    let bomb: unknown = { leaf: "x" }
    for (let i = 0; i < 40; i++) bomb = { left: bomb, right: bomb }
    expect(jsonProblem(bomb)).toMatch(/bytes of JSON text$/)
  })

  it("names a cycle, a hole, a non-plain object and a getter that throws by their path", () => {
    const cycle: Record<string, unknown> = { items: [] }
    ;(cycle["items"] as Array<unknown>).push({ back: cycle })
    expect(jsonProblem(cycle)).toBe(`$."items"[0]."back" refers back to itself (a cycle)`)
    expect(jsonProblem({ a: [1, , 3] })).toBe(`$."a"[1] is a hole in a sparse array`)
    expect(jsonProblem({ d: new Date(0) })).toBe(`$."d" is not a plain object`)
    const throwing = Object.defineProperty({}, "x", {
      enumerable: true,
      get: () => {
        throw new Error("no")
      }
    })
    expect(jsonProblem({ nested: throwing })).toBe(`$."nested"."x" could not be read (reading it threw)`)
  })
})
