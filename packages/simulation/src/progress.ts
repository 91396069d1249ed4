/** How progress is shown while a run goes: a line rewritten in place, plain periodic lines, or nothing. */
export type ProgressMode = "live" | "lines" | "none"

/** Where the run stands, for the progress line. */
export interface ProgressStatus {
  readonly elapsedMs: number
  readonly phase: string
  readonly planned: number
  readonly stored: number
  readonly final: number
  readonly committed: number
  readonly requests: number
  readonly applied: number
  readonly crashes: number
  readonly verified: number
  readonly watches: number
  readonly offline: boolean
  readonly grantExpired: boolean
}

/** One line saying where the run stands. */
export const progressLine = (s: ProgressStatus): string =>
  [
    `${(s.elapsedMs / 1000).toFixed(1)}s`,
    s.phase,
    `writes ${s.final}/${s.planned} final (${s.committed} committed, ${s.stored - s.final} in flight)`,
    `provider requests ${s.requests} (${s.applied} applied)`,
    `crashes ${s.crashes}`,
    `watches ${s.verified}/${s.watches} verified`,
    ...(s.offline ? ["OFFLINE"] : []),
    ...(s.grantExpired ? ["grant expired"] : [])
  ].join(" · ")

/** Shows progress: on a TTY one line rewritten in place; otherwise a plain line at most once a second. */
export const makeProgress = (mode: ProgressMode, write: (text: string) => void) => {
  let lastLine = 0
  let shown = false
  return {
    update: (status: ProgressStatus) => {
      if (mode === "none") return
      const line = progressLine(status)
      if (mode === "live") {
        write(`\r\x1b[2K${line}`)
        shown = true
      } else if (status.elapsedMs - lastLine >= 1_000) {
        write(`${line}\n`)
        lastLine = status.elapsedMs
      }
    },
    done: () => {
      if (mode === "live" && shown) write("\r\x1b[2K")
    }
  }
}
