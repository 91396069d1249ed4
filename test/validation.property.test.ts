// The id and text rules read each string once (they run a dozen times per hot
// call). This holds them to their plain statement, written here the obvious
// way: refuse NUL first, then a lone surrogate, then more than the byte limit
// of UTF-8; over arbitrary strings, with NULs, surrogate halves and long
// multi-byte runs made likely.
import { MAX_ID_BYTES } from "@connector-store/core"
import { Rules } from "@connector-store/core/adapter"
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
