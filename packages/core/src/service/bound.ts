import { Context, Effect, Exit, type Fiber, FiberId, Layer, Runtime } from "effect"
import { PersistenceError, StoreClosed } from "../errors.js"

/** How long one call of a store may take when its options name no bound (30 s). */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000

/** How long `close()` waits for calls in flight when its options name no bound (5 s). */
export const DEFAULT_CLOSE_TIMEOUT_MS = 5_000

/** What `close()` may take beyond its bound, ending the calls still in flight and releasing their connections. */
export const CLOSE_MARGIN_MS = 1_000

/** How long a call that ran out waits at most for what it left running to stop, so nothing of it applies after its answer. */
export const STOP_GRACE_MS = 500

/** A call in flight under its bound: what ends it now, with `error`, when the store closes under it. */
export interface BoundedCall {
  readonly end: (error: (method: string) => unknown) => void
}

/**
 * A store's time bounds and the calls running under them: every public call is bounded by `callTimeoutMs`, and `endAll` ends
 * those still running (a late `close()`).
 */
export interface CallBoundary {
  readonly callTimeoutMs: number
  readonly closeTimeoutMs: number
  /** Runs `call` under the bound: ended with `callTimedOut` at `started + callTimeoutMs` (`performance.now()`) unless it leaves first. */
  readonly enter: (call: BoundedCall, started?: number) => void
  /** `call` ended (answered or was ended); nothing of the bound is left for it. */
  readonly leave: (call: BoundedCall) => void
  /** Ends every call still running with `StoreClosed` naming its method. */
  readonly endAll: () => void
}

/** The bounds a store is opened with; absent ones take their default. */
export interface CallBoundOptions {
  readonly callTimeoutMs?: number | undefined
  readonly closeTimeoutMs?: number | undefined
}

/** The running calls and their deadlines under one timer for the earliest, holding the process open only while a call runs. */
class Boundary implements CallBoundary {
  private readonly running = new Map<BoundedCall, number>()
  private timer: ReturnType<typeof setTimeout> | undefined
  private timerAt = Infinity

  constructor(readonly callTimeoutMs: number, readonly closeTimeoutMs: number) {}

  enter(call: BoundedCall, started = performance.now()): void {
    const deadline = started + this.callTimeoutMs
    this.running.set(call, deadline)
    if (this.running.size === 1) this.timer?.ref()
    if (deadline < this.timerAt) this.arm(deadline)
  }

  leave(call: BoundedCall): void {
    if (this.running.delete(call) && this.running.size === 0) this.timer?.unref()
  }

  endAll(): void {
    for (const call of Array.from(this.running.keys())) call.end((method) => new StoreClosed({ method }))
  }

  private arm(at: number): void {
    clearTimeout(this.timer)
    this.timerAt = at
    this.timer = setTimeout(() => this.expire(), Math.max(0, Math.ceil(at - performance.now())))
  }

  /** Ends the calls past their deadline, and sets the timer for the next one. */
  private expire(): void {
    this.timer = undefined
    this.timerAt = Infinity
    const now = performance.now()
    let next = Infinity
    for (const [call, deadline] of Array.from(this.running)) {
      if (deadline <= now) call.end(timedOutAfter(this.callTimeoutMs))
      else next = Math.min(next, deadline)
    }
    if (next !== Infinity) this.arm(next)
  }
}

/** A fresh boundary, with no call running. */
export const makeCallBoundary = (options: CallBoundOptions = {}): CallBoundary =>
  new Boundary(options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS, options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS)

/** The store's call boundary, one per opened store, read by its service and its Promise facade (the defaults without it). */
export class CallBounds extends Context.Tag("@connector-store/core/CallBounds")<CallBounds, CallBoundary>() {
  /** A boundary of its own for each store built with it. */
  static readonly layer = (options: CallBoundOptions = {}): Layer.Layer<CallBounds> =>
    Layer.sync(CallBounds, () => makeCallBoundary(options))
}

/** The boundary in `context`, or undefined. */
export const callBoundaryIn = (context: Context.Context<never>): CallBoundary | undefined =>
  Context.getOption(context as Context.Context<CallBounds>, CallBounds).pipe((found) => found._tag === "Some" ? found.value : undefined)

/** The failure of a call of `method` that ran past `ms`: a `PersistenceError` of reason `timeout`; nothing of it was committed. */
export const callTimedOut = (method: string, ms: number): PersistenceError =>
  new PersistenceError({
    operation: method,
    method,
    reason: "timeout",
    cause: new Error(`${method} did not end within ${ms} ms (callTimeoutMs)`),
    driverMessage: `the call did not end within ${ms} ms`
  })

/**
 * `effect`, a call of `method`, ended within the boundary's `callTimeoutMs`: it runs at once on a fiber of its own (no timer
 * when that ends it); at the deadline the fiber is interrupted and the call fails once it stopped, `STOP_GRACE_MS` later at
 * most. A late `close()` ends it likewise with `StoreClosed`.
 */
export const bounded = <A, E, R>(
  boundary: CallBoundary,
  method: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | PersistenceError, R> =>
  Effect.withFiberRuntime<A, E | PersistenceError, R>((parent, status) => {
    const runtime = Runtime.make({
      context: parent.currentContext as Context.Context<R>,
      fiberRefs: parent.getFiberRefs(),
      runtimeFlags: status.runtimeFlags
    })
    const child = Runtime.runFork(runtime)(effect, { immediate: true })
    const done = child.unsafePoll()
    if (done !== null) return done
    return Effect.async<A, E | PersistenceError>((resume) => {
      let answered = false
      // Set once the caller is interrupted: it then waits for the call to end, until the deadline.
      let callerWaits: (() => void) | undefined
      const leave = () => boundary.leave(call)
      const call: BoundedCall = {
        end: (error) => {
          child.unsafeInterruptAsFork(FiberId.none)
          if (callerWaits !== undefined) return callerWaits()
          if (answered) return
          answered = true
          leave()
          const failed = Exit.fail(error(method) as PersistenceError)
          // A call that completed while it was being stopped (its commit answered) answers with its value.
          afterStopped(child, () => {
            const exit = child.unsafePoll()
            resume(exit !== null && Exit.isSuccess(exit) ? exit : failed)
          })
        }
      }
      boundary.enter(call)
      child.addObserver((exit) => {
        if (callerWaits !== undefined) return callerWaits()
        if (answered) return
        answered = true
        leave()
        resume(exit)
      })
      return Effect.async<void>((ended) => {
        answered = true
        callerWaits = () => {
          callerWaits = () => undefined
          leave()
          ended(Effect.void)
        }
        child.unsafeInterruptAsFork(parent.id())
      })
    })
  })

const timedOutAfter = (ms: number) => (method: string): PersistenceError => callTimedOut(method, ms)

/**
 * A call's deadline while it waits in its transaction on a winner read run on the caller's fiber: a read of the store's own
 * making is woken at the deadline; a user's Effect reader is not interrupted, but the transaction is given up then.
 */
export interface WaitExpiry {
  /** The call's failure once its deadline passed (or the store closed under it); undefined before. */
  readonly error: unknown
  /** Calls `wake` with the call's failure at the deadline (at once if it passed). */
  readonly onExpire: (wake: (error: unknown) => void) => void
}

/** The wait each fiber is in now, if any (see `pendingWaitOf`). */
const waitsByFiber = new WeakMap<Fiber.RuntimeFiber<unknown, unknown>, PendingWait>()

/** The wait of the call `fiber` runs, while it waits on a winner read (a read of the store's own making registers with it). */
export const pendingWaitOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): WaitExpiry | undefined => waitsByFiber.get(fiber)

/**
 * The deadline of a wait of a call of `method` started at `started`: at `started + callTimeoutMs`, or a close, `giveUp` runs
 * and the registered reads are woken.
 */
export class PendingWait implements WaitExpiry, BoundedCall {
  error: unknown = undefined
  private wakes: Array<(error: unknown) => void> | undefined

  constructor(
    private readonly boundary: CallBoundary,
    private readonly method: string,
    started: number,
    private readonly giveUp: () => void,
    private readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  ) {
    boundary.enter(this, started)
    waitsByFiber.set(fiber, this)
  }

  end(error: (method: string) => unknown): void {
    if (this.error !== undefined) return
    this.error = error(this.method)
    this.leave()
    try {
      this.giveUp()
    } catch {
      // The transaction could not be rolled back cleanly: the call fails all the same, with its bound's error.
    }
    const wakes = this.wakes
    this.wakes = undefined
    if (wakes !== undefined) for (const wake of wakes) wake(this.error)
  }

  onExpire(wake: (error: unknown) => void): void {
    if (this.error !== undefined) return wake(this.error)
    ;(this.wakes ??= []).push(wake)
  }

  leave(): void {
    this.boundary.leave(this)
    if (waitsByFiber.get(this.fiber) === this) waitsByFiber.delete(this.fiber)
  }
}

/** Runs `then` once `child` has ended (its interruption done), or `STOP_GRACE_MS` from now, whichever is first. */
const afterStopped = (child: Fiber.RuntimeFiber<unknown, unknown>, then: () => void): void =>
  child.unsafePoll() !== null ? then() : withinGrace((done) => child.addObserver(done), then)

/** Runs `then` once `stopping` has settled (when it is a Promise), or `STOP_GRACE_MS` from now, whichever is first. */
const afterSettled = (stopping: unknown, then: () => void): void =>
  !(stopping instanceof Promise) ? then() : withinGrace((done) => stopping.then(done, done), then)

/** Runs `then` once, when `awaitEnd` calls back or `STOP_GRACE_MS` from now, whichever is first. */
const withinGrace = (awaitEnd: (done: () => void) => void, then: () => void): void => {
  let done = false
  const once = () => {
    if (done) return
    done = true
    clearTimeout(grace)
    then()
  }
  const grace = setTimeout(once, STOP_GRACE_MS)
  awaitEnd(once)
}

/** A lane call (no fiber): `expired` once its deadline passed or the store closed; `onEnd` stops what it handed to the ports. */
export interface LaneCall {
  expired: boolean
  onEnd: (() => void | Promise<unknown>) | undefined
}

let sending: LaneCall | undefined

/** Runs `send`, a step of a lane call sending statements outside a transaction, on `call`'s behalf (see `laneCallNow`). */
export const onBehalfOf = <A>(call: LaneCall | undefined, send: () => A): A => {
  const outer = sending
  sending = call
  try {
    return send()
  } finally {
    sending = outer
  }
}

/** The lane call a statement is sent for now, outside a transaction: an adapter gives its connection up when that call ends. */
export const laneCallNow = (): LaneCall | undefined => sending

/** `effect`, the part of a lane call handed to the ports, interrupted when `call` ends (which waits for it to stop) and never started once it has. */
export const endedWith = <A, E, R>(call: LaneCall | undefined, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  call === undefined ? effect : Effect.withFiberRuntime<A, E, R>((fiber) => {
    if (call.expired) return Effect.interrupt
    call.onEnd = () =>
      new Promise<void>((stopped) => {
        fiber.addObserver(() => stopped())
        fiber.unsafeInterruptAsFork(FiberId.none)
      })
    return effect
  })

/**
 * `answer`, the Promise of a lane call of `method`, bounded like `bounded`: at the deadline or a close, `call` is marked
 * expired and ended (`onEnd`), and it rejects once that is done, `STOP_GRACE_MS` later at most.
 */
export const boundedPromise = <A>(boundary: CallBoundary, method: string, call: LaneCall, answer: Promise<A>): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    let settled = false
    let failure: unknown
    const leave = () => boundary.leave(entry)
    const entry: BoundedCall = {
      end: (error) => {
        if (settled || failure !== undefined) return
        failure = error(method)
        call.expired = true
        leave()
        afterSettled(call.onEnd?.(), () => {
          if (settled) return
          settled = true
          reject(failure)
        })
      }
    }
    boundary.enter(entry)
    answer.then(
      (value) => {
        if (settled) return
        // Also while it was being stopped: the call completed (its commit answered), so it answers with its value.
        settled = true
        leave()
        resolve(value)
      },
      (error: unknown) => {
        // Being stopped, it rejects once that is done: its statements fail as soon as their connection is closed.
        if (settled || failure !== undefined) return
        settled = true
        leave()
        reject(error)
      }
    )
  })
