import { Clock, type Duration, Effect } from "effect"
import { InvalidClockReading } from "./errors.js"
import { isTime } from "./validation.js"

const VALIDATED_READING: unique symbol = Symbol.for("@connector-store/core/clock/validatedReading")

/** The time `clock` says now, read synchronously; undefined for an injected clock's reading that is no time. */
export const clockReadingNow = (clock: Clock.Clock): number | undefined => {
  const validated = (clock as unknown as { readonly [VALIDATED_READING]?: () => number | undefined })[VALIDATED_READING]
  return validated === undefined ? clock.unsafeCurrentTimeMillis() : validated()
}

/** A `Clock` reading `now()`: a reading that is no time fails a decision with `InvalidClockReading`. */
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
