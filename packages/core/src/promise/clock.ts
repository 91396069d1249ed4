import { Clock, Effect } from "effect"

/** A `Clock` whose time is `now()`, for stores opened with an injected clock. */
export const clockFrom = (now: () => number): Clock.Clock => {
  const base = Clock.make()
  const nanos = () => BigInt(Math.trunc(now())) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: now,
    unsafeCurrentTimeNanos: nanos,
    currentTimeMillis: Effect.sync(now),
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => base.sleep(duration)
  }
}
