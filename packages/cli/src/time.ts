/** The units a duration may use: `30s`, `15m`, `12h`, `7d`, `2w`. */
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/** A duration like `7d` or `90m` in milliseconds, or `undefined` when it is not one. */
export const parseDuration = (text: string): number | undefined => {
  const match = /^(\d+)(ms|s|m|h|d|w)$/.exec(text.trim())
  if (match === null) return undefined
  const ms = Number(match[1]) * UNIT_MS[match[2]!]!
  return Number.isSafeInteger(ms) ? ms : undefined
}

/** An ISO date or date-time (`2026-11-30`, `2026-11-30T10:00:00Z`) in epoch ms, or `undefined`. */
export const parseIsoTime = (text: string): number | undefined => {
  if (!/^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text.trim())) return undefined
  const ms = Date.parse(text.trim())
  return Number.isFinite(ms) ? ms : undefined
}

/**
 * A point in time given as `now`, an ISO date, or a duration counted from
 * `now` in `direction` (`-1`: that long ago, `+1`: that long from now).
 * `undefined` when the text is none of these.
 */
export const parseTime = (text: string, now: number, direction: 1 | -1): number | undefined => {
  if (text.trim() === "now") return now
  const duration = parseDuration(text)
  return duration !== undefined ? now + direction * duration : parseIsoTime(text)
}

/** An epoch time as an ISO string, or `-` for none. */
export const isoTime = (ms: number | null): string => ms === null ? "-" : new Date(ms).toISOString()

/** A compact duration: `45s`, `12m`, `3h`, `2d`. */
export const compactDuration = (ms: number): string => {
  const abs = Math.abs(ms)
  if (abs < 1_000) return `${abs}ms`
  if (abs < 60_000) return `${Math.floor(abs / 1_000)}s`
  if (abs < 3_600_000) return `${Math.floor(abs / 60_000)}m`
  if (abs < 86_400_000) return `${Math.floor(abs / 3_600_000)}h`
  return `${Math.floor(abs / 86_400_000)}d`
}

/** An epoch time relative to `now`: `in 5m`, `3h ago`, `now`, or `-` for none. */
export const age = (ms: number | null, now: number): string => {
  if (ms === null) return "-"
  if (ms === now) return "now"
  return ms > now ? `in ${compactDuration(ms - now)}` : `${compactDuration(now - ms)} ago`
}

/** How far from now a time may lie before a table shows its date beside its age. */
const NEAR_MS = 7 * 86_400_000

/**
 * An epoch time as a table cell shows it: its `age` against `now`, and,
 * for a time more than a week away, its UTC date and minute beside it
 * (`335d ago (2026-01-01 00:03Z)`), so a time on another clock (a
 * simulated run's, a machine's that was off) reads for what it is.
 */
export const relativeTime = (ms: number | null, now: number): string => {
  const shown = age(ms, now)
  const date = new Date(ms ?? Number.NaN)
  if (ms === null || Math.abs(ms - now) < NEAR_MS || Number.isNaN(date.getTime())) return shown
  return `${shown} (${date.toISOString().slice(0, 16).replace("T", " ")}Z)`
}
