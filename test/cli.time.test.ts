import { describe, expect, it } from "vitest"
import { parseDuration, parseTime, relativeTime } from "../packages/cli/src/time.js"

const NOW = Date.parse("2026-11-30T12:00:00.000Z")

describe("CLI times", () => {
  it("reads durations in every unit and refuses anything else", () => {
    expect(["500ms", "45s", "15m", "12h", "7d", "2w"].map(parseDuration)).toEqual([500, 45_000, 900_000, 43_200_000, 604_800_000, 1_209_600_000])
    for (const bad of ["", "7", "d", "7 days", "-7d", "1.5h", "7D"]) expect(parseDuration(bad), bad).toBeUndefined()
  })

  it("reads `now`, a duration back or forth from now, or an ISO date; nothing else", () => {
    expect(parseTime("now", NOW, -1)).toBe(NOW)
    expect(parseTime("7d", NOW, -1)).toBe(Date.parse("2026-11-23T12:00:00.000Z"))
    expect(parseTime("10m", NOW, 1)).toBe(Date.parse("2026-11-30T12:10:00.000Z"))
    expect(parseTime("2026-01-02", NOW, -1)).toBe(Date.parse("2026-01-02T00:00:00.000Z"))
    expect(parseTime("2026-01-02T03:04:05Z", NOW, -1)).toBe(Date.parse("2026-01-02T03:04:05.000Z"))
    for (const bad of ["yesterday", "2026-13-45", "12/01/2026", "soon"]) expect(parseTime(bad, NOW, -1), bad).toBeUndefined()
  })

  it("prints times relative to now in the largest whole unit", () => {
    expect([
      relativeTime(NOW, NOW),
      relativeTime(NOW + 5 * 60_000 + 10, NOW),
      relativeTime(NOW - 3 * 3_600_000, NOW),
      relativeTime(NOW - 2 * 86_400_000 - 1, NOW),
      relativeTime(null, NOW)
    ]).toEqual(["now", "in 5m", "3h ago", "2d ago", "-"])
  })
})
