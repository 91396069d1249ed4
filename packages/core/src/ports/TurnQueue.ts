import { Effect } from "effect"

/**
 * One holder at a time, for an adapter whose database takes one
 * transaction at a time (the SQLite connection, the memory database). The
 * holder sets `held`; anyone else waits on `released` (asynchronously,
 * interruptibly) and checks again when woken. Checking and taking are one
 * synchronous step of the caller, outside any interruptible region, so an
 * interruption can never leave the turn taken. A release wakes every
 * waiter, so a waiter interrupted after its wake-up strands no one.
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

  /**
   * True while the turn is held or anyone waits for it, woken or not: a
   * caller that does not wait in the queue (the direct path) stays out, so
   * it never takes the turn ahead of fibers already waiting.
   */
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
