import { Clock, type Duration, Effect } from "effect"
import { InvalidClockReading } from "./errors.js"
import { isTime } from "./validation.js"

const VALIDATED_READING: unique symbol = Symbol.for("@connector-store/core/clock/validatedReading")

/**
 * The time `clock` says now, read synchronously for a decision: an injected
 * clock's (`clockFrom`) reading when it is a time, undefined when it is not
 * (the caller then takes the Effect path, which refuses it with
 * `InvalidClockReading`); any other clock's `unsafeCurrentTimeMillis`, which
 * for Effect's clocks (the default one, `TestClock`) is what
 * `currentTimeMillis` reads.
 */
export const clockReadingNow = (clock: Clock.Clock): number | undefined => {
  const validated = (clock as unknown as { readonly [VALIDATED_READING]?: () => number | undefined })[VALIDATED_READING]
  return validated === undefined ? clock.unsafeCurrentTimeMillis() : validated()
}

/**
 * A `Clock` whose time is `now()`, for stores opened with an injected clock.
 * A reading that is not a non-negative safe integer of milliseconds (NaN, a
 * fraction, a negative or huge number, a non-number) stops the call that
 * reads it for a decision (`Clock.currentTimeMillis`) with
 * `InvalidClockReading`, before anything is written. The runtime's own
 * readings (span timestamps, caches: the `unsafe*` and nanosecond readings)
 * fall back to the system clock on such a reading, so that machinery keeps
 * working while the call is refused.
 */
export const clockFrom = (now: () => number): Clock.Clock => {
  const base = Clock.make()
  const millis = (): number => {
    const reading: unknown = now()
    return isTime(reading) ? reading : base.unsafeCurrentTimeMillis()
  }
  const nanos = (): bigint => {
    const reading: unknown = now()
    return isTime(reading) ? BigInt(reading) * 1_000_000n : base.unsafeCurrentTimeNanos()
  }
  const clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    [VALIDATED_READING]: () => {
      const reading: unknown = now()
      return isTime(reading) ? reading : undefined
    },
    unsafeCurrentTimeMillis: millis,
    unsafeCurrentTimeNanos: nanos,
    currentTimeMillis: Effect.sync(() => {
      const reading: unknown = now()
      if (!isTime(reading)) throw new InvalidClockReading({ reading: String(reading) })
      return reading
    }),
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration: Duration.Duration) => base.sleep(duration)
  }
  return clock as Clock.Clock
}
