import { Context, Effect, Exit, type Fiber, FiberId, Layer, Runtime } from "effect"
import { PersistenceError, StoreClosed } from "../errors.js"

/** How long one call of a store may take when its options name no bound (30 s). */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000

/** How long `close()` waits for calls in flight when its options name no bound (5 s). */
export const DEFAULT_CLOSE_TIMEOUT_MS = 5_000

/**
 * What `close()` may take beyond its bound: forcing the calls still in
 * flight to end and releasing the connections under them.
 */
export const CLOSE_MARGIN_MS = 1_000

/**
 * How long a call that ran out waits, at most, for what it left running to
 * stop (a statement cancelled on the server, a connection closed) before
 * it answers: then nothing of it can apply after its answer.
 */
export const STOP_GRACE_MS = 250

/** A call in flight under its bound: what ends it now, with `error`, when the store closes under it. */
export interface BoundedCall {
  readonly end: (error: (method: string) => unknown) => void
}

/**
 * A store's time bounds and the calls running under them. Every public
 * call (Effect API, Promise API, the lane) is bounded by `callTimeoutMs`
 * (on the Effect API, a winner reader written as an Effect is the caller's
 * own: its transaction is given up at the deadline, and the call fails once
 * it ends; see `PendingWait`); `endAll` ends those still running (a
 * `close()` past `closeTimeoutMs`).
 */
export interface CallBoundary {
  readonly callTimeoutMs: number
  readonly closeTimeoutMs: number
  /**
   * Runs `call` under the bound: it is ended with `callTimedOut` at
   * `started + callTimeoutMs` (`performance.now()`; now by default) unless
   * it leaves first.
   */
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

/**
 * The running calls and their deadlines, under one timer set for the
 * earliest: a call costs a map entry, not a timer of its own (a timer per
 * call cost a sixth of an asynchronous SQLite watch cycle). The timer holds
 * the process open only while a call runs.
 */
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

/**
 * The store's call boundary, read by the store's service and its Promise
 * facade: one per opened store. A store built without it bounds its calls
 * by the defaults.
 */
export class CallBounds extends Context.Tag("@connector-store/core/CallBounds")<CallBounds, CallBoundary>() {
  /** A boundary of its own for each store built with it. */
  static readonly layer = (options: CallBoundOptions = {}): Layer.Layer<CallBounds> =>
    Layer.sync(CallBounds, () => makeCallBoundary(options))
}

/** The boundary in `context`, or undefined. */
export const callBoundaryIn = (context: Context.Context<never>): CallBoundary | undefined =>
  Context.getOption(context as Context.Context<CallBounds>, CallBounds).pipe((found) => found._tag === "Some" ? found.value : undefined)

/**
 * The failure of a call of `method` that ran past `ms`: a `PersistenceError`
 * of reason `timeout`. Nothing of the call was committed: its transaction
 * was rolled back, or its connection closed under it.
 */
export const callTimedOut = (method: string, ms: number): PersistenceError =>
  new PersistenceError({
    operation: method,
    method,
    reason: "timeout",
    cause: new Error(`${method} did not end within ${ms} ms (callTimeoutMs)`),
    driverMessage: `the call did not end within ${ms} ms`
  })

/**
 * `effect`, a call of `method`, ended within the boundary's `callTimeoutMs`.
 * It runs at once on a fiber of its own (the caller's context, fiber refs
 * and interruptibility): one that ends in that first step answers with no
 * timer at all. Otherwise a timer bounds it: at the deadline its fiber is
 * interrupted and the call fails with `callTimedOut` once that fiber has
 * stopped, or `STOP_GRACE_MS` later at most (a fiber stuck where it cannot
 * be interrupted, a commit on a dead network, ends in the background when
 * the adapter closes its connection). A `close()` past its own bound ends it with
 * `StoreClosed` the same way. Interrupting the caller interrupts the call
 * and waits for it, but never past its deadline.
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
 * A call's deadline while it waits, inside its transaction, on a winner read
 * run on the caller's own fiber (the Effect API's direct path: no fiber of
 * its own to interrupt). A read of the store's own making (a Promise
 * reader) registers with `onExpire` and is woken at the deadline; a user's
 * Effect reader is not interrupted, but its transaction is given up then,
 * so the connection and its lock go on to the next call, and the call fails
 * with `error` once its read ends.
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
 * The deadline of a wait of a call of `method` that started at `started`
 * (`performance.now()`), under `boundary`: at `started + callTimeoutMs`, or
 * when the store closes under it, `giveUp` runs (the transaction rolled
 * back) and the registered reads are woken. `leave` once the wait ended.
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

/**
 * A call of the lane (no fiber): `expired` once its deadline passed or the
 * store closed under it; `onEnd` is what stops the work it handed to a
 * fiber (the ports) when that happens.
 */
export interface LaneCall {
  expired: boolean
  onEnd: (() => void | Promise<unknown>) | undefined
}

let sending: LaneCall | undefined

/**
 * Runs `send` (a step of a lane call that sends statements outside any
 * transaction) with `call` as the call the adapter sends them for (see
 * `laneCallNow`).
 */
export const onBehalfOf = <A>(call: LaneCall | undefined, send: () => A): A => {
  const outer = sending
  sending = call
  try {
    return send()
  } finally {
    sending = outer
  }
}

/**
 * The lane call on whose behalf a statement is being sent now, outside a
 * transaction: an adapter whose statement could outlive the call gives its
 * connection up when the call ends (`LaneCall.onEnd`). Read synchronously,
 * when the statement is sent; undefined outside such a step.
 */
export const laneCallNow = (): LaneCall | undefined => sending

/**
 * `effect`, the part of a lane call handed to the ports, interrupted when
 * `call` ends (its deadline, a close), and never started once it has.
 */
export const endedWith = <A, E, R>(call: LaneCall | undefined, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  call === undefined ? effect : Effect.withFiberRuntime<A, E, R>((fiber) => {
    if (call.expired) return Effect.interrupt
    call.onEnd = () => fiber.unsafeInterruptAsFork(FiberId.none)
    return effect
  })

/**
 * `answer`, the Promise of a lane call of `method`, bounded like `bounded`:
 * at the deadline (or when the store closes under it) `call` is marked
 * expired, so that the call commits nothing after, and ended
 * (`call.onEnd`: its transaction or statement given up, what it handed to
 * the ports interrupted); it rejects with `callTimedOut` (or
 * `StoreClosed`) once that is done, `STOP_GRACE_MS` later at most.
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
        if (settled) return
        settled = true
        leave()
        reject(failure ?? error)
      }
    )
  })
