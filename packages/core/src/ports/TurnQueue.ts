import { Effect } from "effect"

/**
 * One holder at a time, for a database that takes one transaction at a time: the check-and-take is one synchronous step, and a
 * release wakes every waiter to check again.
 */
export class TurnQueue {
  held = false
  private readonly waiters = new Set<() => void>()
  /** Waiters woken by a release that have not yet checked again. */
  private woken = 0

  /** Completes when the holder next releases the turn. */
  readonly released: Effect.Effect<void> = Effect.suspend(() => {
    let wokenUp = false
    return Effect.ensuring(
      Effect.async<void>((resume) => {
        const wake = () => {
          wokenUp = true
          resume(Effect.void)
        }
        this.waiters.add(wake)
        return Effect.sync(() => {
          this.waiters.delete(wake)
        })
      }),
      // Woken, then resumed or interrupted: either way no longer pending.
      Effect.sync(() => {
        if (wokenUp) this.woken--
      })
    )
  })

  /** True while the turn is held or anyone waits for it, so the direct path never takes it ahead of waiting fibers. */
  get busy(): boolean {
    return this.held || this.waiters.size > 0 || this.woken > 0
  }

  /** Hands the turn on: every waiter checks again, one takes it, the others wait anew. */
  release(): void {
    this.held = false
    if (this.waiters.size === 0) return
    const woken = [...this.waiters]
    this.waiters.clear()
    this.woken += woken.length
    for (const wake of woken) wake()
  }
}
