/**
 * The time a simulation runs on, and how its concurrent tasks take turns.
 * Every task of a run (a runner, a loop, a request left in flight) starts
 * with `spawn`, waits with `sleep`, and waits for another task with `join`.
 */
export interface SimClock {
  /** The run's time, in epoch milliseconds. */
  readonly now: () => number
  /** Resolves once `ms` of the run's time have passed. */
  readonly sleep: (ms: number) => Promise<void>
  /** Starts `task` as one of the run's tasks; its result. */
  readonly spawn: <A>(task: () => Promise<A>) => Promise<A>
  /** Waits for `promise`, which other tasks settle, letting them run meanwhile. */
  readonly join: <A>(promise: Promise<A>) => Promise<A>
}

/** The machine's clock and timers: tasks run at once, as the event loop interleaves them. */
export const realClock: SimClock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  spawn: (task) => task(),
  join: (promise) => promise
}

/** The instant a virtual run starts at: 2026-01-01T00:00:00Z. */
export const VIRTUAL_EPOCH = Date.UTC(2026, 0, 1)

interface Timer {
  readonly at: number
  readonly order: number
  readonly wake: () => void
}

/**
 * A clock whose time moves only when every task of the run waits for it:
 * then the earliest sleep ends (ties in the order they began), and only
 * that task runs until it sleeps, joins or ends. So tasks take turns in an
 * order fixed by the run's own steps, never by the machine's speed, and a
 * lease or a backoff lapses after as many steps on every run. A task that
 * waits on anything else (a store call) keeps time still until it answers.
 */
export const makeVirtualClock = (start: number = VIRTUAL_EPOCH): SimClock => {
  let now = start
  let running = 0
  let order = 0
  let checking = false
  const timers: Array<Timer> = []

  const advanceWhenIdle = () => {
    if (checking || running > 0) return
    checking = true
    // After the microtasks queued now: a join that just settled has resumed its task by then.
    setImmediate(() => {
      checking = false
      if (running > 0 || timers.length === 0) return
      let next = 0
      for (let i = 1; i < timers.length; i++) {
        const t = timers[i]!
        const best = timers[next]!
        if (t.at < best.at || (t.at === best.at && t.order < best.order)) next = i
      }
      const [timer] = timers.splice(next, 1)
      now = Math.max(now, timer!.at)
      running++
      timer!.wake()
    })
  }
  const paused = () => {
    running--
    advanceWhenIdle()
  }

  return {
    now: () => now,
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        timers.push({ at: now + Math.max(0, Math.ceil(ms)), order: order++, wake: resolve })
        paused()
      }),
    spawn: <A>(task: () => Promise<A>): Promise<A> => {
      running++
      const done = Promise.resolve().then(task)
      done.then(paused, paused)
      return done
    },
    join: <A>(promise: Promise<A>): Promise<A> => {
      paused()
      return promise.then(
        (value) => {
          running++
          return value
        },
        (error: unknown) => {
          running++
          throw error
        }
      )
    }
  }
}
