import { Clock, Effect } from "effect"
import { InvalidClockReading } from "../errors.js"

/**
 * A `Clock` whose time is `now()`, for stores opened with an injected clock.
 * A reading that is not a non-negative safe integer of milliseconds (NaN, a
 * fraction, a negative or huge number, a non-number) stops the call with
 * `InvalidClockReading` before anything is written.
 */
export const clockFrom = (now: () => number): Clock.Clock => {
  const base = Clock.make()
  const millis = (): number => {
    const reading: unknown = now()
    if (typeof reading !== "number" || !Number.isSafeInteger(reading) || reading < 0) {
      throw new InvalidClockReading({ reading: String(reading) })
    }
    return reading
  }
  const nanos = () => BigInt(millis()) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    unsafeCurrentTimeNanos: nanos,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => base.sleep(duration)
  }
}
