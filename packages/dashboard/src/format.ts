/** A time as ISO text, or `-`. */
export const isoOf = (ms: number | null | undefined): string => ms === null || ms === undefined ? "-" : new Date(ms).toISOString()

/** A span of milliseconds in the largest unit that keeps it short: `45s`, `12m`, `3h`, `2d`. */
export const spanOf = (ms: number): string => {
  const s = Math.round(Math.abs(ms) / 1000)
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : s < 172_800 ? `${Math.floor(s / 3600)}h` : `${Math.floor(s / 86_400)}d`
}

/** How far `ms` is from `now`, in words: `in 5m`, `3h ago`, `now`. */
export const relativeOf = (ms: number | null | undefined, now: number): string => {
  if (ms === null || ms === undefined) return "-"
  if (Math.abs(ms - now) < 1000) return "now"
  return ms > now ? `in ${spanOf(ms - now)}` : `${spanOf(now - ms)} ago`
}

/** A JSON value as indented text, for a `<pre>` (escaped where it is shown). */
export const jsonText = (value: unknown): string => {
  try {
    return JSON.stringify(value, null, 2) ?? "undefined"
  } catch {
    return String(value)
  }
}
