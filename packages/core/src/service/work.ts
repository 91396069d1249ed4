import { Deferred, Effect, Exit, Option } from "effect"
import { type InvalidInput, StoreClosed } from "../errors.js"
import { type WorkSignalApi, type WorkWake, WorkNotices, WorkSignal } from "../ports/WorkSignal.js"
import { atMost, fieldsOf, Rules, taking, validated } from "../validation.js"

/** The longest one `awaitWork` may wait (one hour): a worker's sweep interval, never a forever. */
export const MAX_WORK_WAIT_MS = 3_600_000

/** What `awaitWork` takes. */
export interface AwaitWorkParams {
  /** The mark of the previous wait (0 before the first): notices after it end the wait at once. */
  readonly since: number
  /** How long to wait for a notice, at most `MAX_WORK_WAIT_MS`: the worker's sweep interval. */
  readonly timeoutMs: number
}

/** The wake-up half of the store's Effect API. */
export interface WorkMethods {
  /**
   * Waits until a commit may have made work due (any process's on SQLite and Postgres, the database's on memory), or
   * `timeoutMs`; a worker sweeps after each wait and passes the answer's `mark` to the next:
   *
   * ```ts
   * let mark = 0
   * for (;;) {
   *   mark = (yield* store.awaitWork({ since: mark, timeoutMs: 5_000 })).mark
   *   // sweep (listDueWork), then work what it found
   * }
   * ```
   *
   * A missed notice costs the timeout, so make it the sweep interval. Not bounded by `callTimeoutMs`; a close ends it.
   */
  readonly awaitWork: (params: AwaitWorkParams) => Effect.Effect<WorkWake, InvalidInput | StoreClosed>
}

const PARAMS = fieldsOf<AwaitWorkParams>("params", {
  since: Rules.nonNegativeInt,
  timeoutMs: atMost(Rules.positiveInt, MAX_WORK_WAIT_MS, " ms")
})

/** Builds `awaitWork` over the adapter's `WorkSignal` (or notices of nothing); `close` ends every wait. */
export const makeWorkMethods = Effect.gen(function*() {
  const signal: WorkSignalApi = Option.getOrElse(yield* Effect.serviceOption(WorkSignal), () => new WorkNotices())
  const closing = yield* Deferred.make<never, StoreClosed>()
  let closed = false
  const methods: WorkMethods = {
    awaitWork: taking("awaitWork", ["params"], [PARAMS.shape], (params: AwaitWorkParams) =>
      validated("awaitWork", PARAMS.checks(params), () =>
        closed
          ? Effect.fail(new StoreClosed({ method: "awaitWork" }))
          : Effect.raceFirst(signal.wait(params.since, params.timeoutMs, "awaitWork"), Deferred.await(closing))))
  }
  const close = () => {
    closed = true
    Deferred.unsafeDone(closing, Exit.fail(new StoreClosed({ method: "awaitWork" })))
  }
  return { methods, close }
})
