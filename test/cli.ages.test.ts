import { describe, expect, it } from "vitest"
import { age, relativeTime } from "../packages/cli/src/time.js"

const NOW = Date.parse("2026-12-03T06:00:00.000Z")
const DAY = 86_400_000

describe("a table's times", () => {
  it("show the UTC date beside an age more than a week away, past or future, so another clock's rows read for what they are", () => {
    // The simulation's clock starts at 2026-01-01; its rows, read a year later.
    expect(relativeTime(Date.parse("2026-01-01T00:03:00.000Z"), NOW)).toBe("336d ago (2026-01-01 00:03Z)")
    expect(relativeTime(NOW + 30 * DAY, NOW)).toBe("in 30d (2027-01-02 06:00Z)")
    expect(relativeTime(0, NOW)).toBe("20790d ago (1970-01-01 00:00Z)")
  })

  it("keep a near time's age alone, and never fail on a time no date can show", () => {
    expect(relativeTime(NOW - 7 * DAY + 1, NOW)).toBe("6d ago")
    expect(relativeTime(NOW + 3 * 60_000, NOW)).toBe("in 3m")
    expect(relativeTime(null, NOW)).toBe("-")
    expect(relativeTime(Number.MAX_SAFE_INTEGER, NOW)).toMatch(/^in \d+d$/)
    expect(age(Date.parse("2026-01-01T00:03:00.000Z"), NOW)).toBe("336d ago")
  })
})
