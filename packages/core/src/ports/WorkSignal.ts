import { Context, Effect } from "effect"
import { StoreClosed } from "../errors.js"

/** How a wait for work ended: `notified` (a commit that may have made work due was seen since the mark) or `timeout`. */
export type WorkWoken = "notified" | "timeout"

/** What a wait for work answers: how it ended, and the mark to wait from next. */
export interface WorkWake {
  readonly woken: WorkWoken
  /** Notices seen so far: the `since` of the next wait, taken before the sweep that follows this one. */
  readonly mark: number
}

/** Notices of commits that may have made work due (a connection's own, other connections' to the same file, or a database's notifications): a notice only says "sweep again". */
export interface WorkSignalApi {
  /** Answers once a notice after `since` was seen, or at `timeoutMs`; fails with `StoreClosed` once the store closes. */
  readonly wait: (since: number, timeoutMs: number, method: string) => Effect.Effect<WorkWake, StoreClosed>
}

/** The adapter's notices of work; optional, read with `serviceOption` (see `awaitWork`). */
export class WorkSignal extends Context.Tag("@connector-store/core/WorkSignal")<WorkSignal, WorkSignalApi>() {}

/** A counter of notices and the waits on it in one process, starting at 1 so a first wait from 0 answers at once. */
export class WorkNotices implements WorkSignalApi {
  private count = 1
  private closed = false
  private readonly waiting = new Set<(closed: boolean) => void>()

  /** A commit (or anything that may have missed one) was seen: every wait ends `notified`. */
  notify(): void {
    this.count++
    if (this.waiting.size > 0) this.wakeAll(false)
  }

  /** The store closed: every wait, and every later one, fails with `StoreClosed`. */
  close(): void {
    this.closed = true
    this.wakeAll(true)
  }

  private wakeAll(closed: boolean): void {
    const woken = Array.from(this.waiting)
    this.waiting.clear()
    for (const wake of woken) wake(closed)
  }

  readonly wait = (since: number, timeoutMs: number, method: string): Effect.Effect<WorkWake, StoreClosed> =>
    Effect.async<WorkWake, StoreClosed>((resume) => {
      if (this.closed) return resume(Effect.fail(new StoreClosed({ method })))
      if (this.count > since) return resume(Effect.succeed({ woken: "notified", mark: this.count }))
      const wake = (closed: boolean) => {
        clearTimeout(timer)
        resume(closed ? Effect.fail(new StoreClosed({ method })) : Effect.succeed({ woken: "notified", mark: this.count }))
      }
      const timer = setTimeout(() => {
        this.waiting.delete(wake)
        resume(Effect.succeed({ woken: "timeout", mark: this.count }))
      }, timeoutMs)
      this.waiting.add(wake)
      return Effect.sync(() => {
        clearTimeout(timer)
        this.waiting.delete(wake)
      })
    })
}
